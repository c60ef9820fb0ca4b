"""README's account of how op ids number prefill and decode layers, against a real
dump of the stand-in (`"ids": "2"` dumping prefill only was once unexplained)."""

from __future__ import annotations

import csv
import re

from e2e_helpers import ABI, require_artifacts, run_dump
from testkit import REPO


def readme_example() -> list[str]:
    text = (REPO / "README.md").read_text()
    said = re.search(r"as `atbsim run` dumps them:(.*?)\. A real service", text, re.S)
    assert said, "README lists the stand-in's top-level ops by id"
    return re.findall(r"`([^`]+)`", said.group(1))


def test_readme_numbers_the_top_level_ops_as_the_stand_in_dumps_them(tmp_path, service_env):
    require_artifacts()
    data = run_dump(tmp_path, service_env, ABI, [], task="statistics", save_child=False)
    (stats,) = data.glob("*/0/statistic.csv")  # round 0: the prefill and a decode step
    ops = {f"{r['Op Id']}_{r['Op Name']}" for r in csv.DictReader(open(stats, newline=""))}
    assert sorted(ops, key=lambda op: int(op.split("_")[0])) == readme_example()
