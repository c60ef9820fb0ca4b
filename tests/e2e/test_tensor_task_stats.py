"""A `task: "tensor"` dump (the default task) has the statistics of every tensor:
the shim computes them on its writer threads from the bytes it
writes, so the manifest's max/min/mean/norm and NaN/Inf/zero counts and
statistic_extra.csv are filled and the README's three SQL questions answer on such
a dump, while statistic.csv stays as msProbe writes it for that task. Made with
`msprobe-atb run` of the stand-in, an +Inf injected into layer 1 (op 2) of round 0;
every expected answer is worked out here from the .bin files."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from e2e_helpers import require_artifacts, run_dump
from testkit import REPO, manifest_rows

from msprobe_atb.offline.read.binfile import load_bin

INJECT = "inf:layer=1,op=SwiGLU,round=0"
MODEL = ["--decode-steps", "6", "--inject", INJECT]
TARGET = ("Max", "Min", "Mean", "Norm")


def readme_questions() -> list[str]:
    """The README's SQL questions, verbatim."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```sql\n(.*?)```", text[text.index("Three questions"):], re.S).group(1)
    return [q.strip() for q in block.split(";") if q.strip()]


def query(out: Path, sql: str) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "query", str(out), sql,
                        "--format", "json"], capture_output=True, text=True, timeout=120,
                       cwd=REPO)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def file_stats(path: Path) -> dict:
    a = load_bin(path).astype(np.float64).ravel()
    finite = a[~np.isnan(a)]
    with np.errstate(invalid="ignore"):  # +Inf and -Inf: the mean is NaN
        mean = a.mean()
    return {"count": a.size, "nan": int(np.isnan(a).sum()), "pinf": int(np.isposinf(a).sum()),
            "ninf": int(np.isneginf(a).sum()), "zero": int((a == 0).sum()),
            "max": finite.max(), "min": finite.min(), "mean": mean,
            "norm": math.sqrt((a * a).sum())}


def first_nonfinite(rows: list[dict]) -> list[dict]:
    """Question 1 from the files: per rank, the first input before or output after an
    op (round, then position in the round) with a NaN or an Inf."""
    firsts: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: (r["round"], r["round_seq"])):
        k = (r["host"], r["device"])
        if k not in firsts and (r["stage"], r["io"]) in (("before", "input"), ("after", "output")) \
                and r["file"]["nan"] + r["file"]["pinf"] + r["file"]["ninf"]:
            firsts[k] = {c: r[c] for c in ("host", "device", "round", "round_seq", "op_id",
                                           "op_name", "io", "index")}
    return sorted(firsts.values(), key=lambda r: (r["round"], r["round_seq"]))


def norm_growth(rows: list[dict]) -> list[tuple]:
    """Question 2 from the files: the layer outputs whose norm grew most, round 0 to 5."""
    def key(r):
        return r["host"], r["device"], r["op_id"], r["stage"], r["io"], r["index"]
    later = {key(r): r for r in rows if r["round"] == 5}
    out = []
    for a in rows:
        b = later.get(key(a))
        na = a["file"]["norm"]
        if (b and a["round"] == 0 and "_" not in a["op_id"] and a["stage"] == "after"
                and a["io"] == "output" and na > 0 and math.isfinite(na + b["file"]["norm"])):
            out.append((a["op_name"], na, b["file"]["norm"]))
    return sorted(out, key=lambda t: -t[2] / t[1])[:10]


def test_readme_sql_answers_on_a_tensor_task_dump(tmp_path, service_env):
    require_artifacts(1)
    data = run_dump(tmp_path, service_env, 1, MODEL, task="tensor", exec_range="all")
    out, root = tmp_path / "out", data.parent
    manifest = manifest_rows(root)
    rows = manifest.to_dicts()
    for r in rows:
        r["file"] = file_stats(root / r["path"])
    assert {r["status"] for r in rows} == {"written", "linked"}

    # the manifest holds each tensor's statistics, those of its file
    for r in rows:
        f = r["file"]
        assert {k: r[k] for k in ("count", "nan", "pinf", "ninf", "zero")} == \
            {k: f[k] for k in ("count", "nan", "pinf", "ninf", "zero")}, r["path"]
        assert (r["max"], r["min"]) == (f["max"], f["min"]), r["path"]
        for k in ("mean", "norm"):
            assert r[k] == pytest.approx(f[k], rel=1e-9, nan_ok=True), (r["path"], k)
    assert sum(r["pinf"] for r in rows) > 0

    q1, q2, q3 = readme_questions()
    # 1: the Inf appears first in layer 1 (op 2) of round 0
    firsts = query(out, q1)
    assert firsts == first_nonfinite(rows) and len(firsts) == 1
    assert firsts[0]["round"] == 0 and firsts[0]["op_id"].split("_")[0] == "2"
    # 2: norms and growth as the files give them
    grown = query(out, q2)
    want = norm_growth(rows)
    assert want and [g["op_name"] for g in grown] == [w[0] for w in want]
    for g, (_, n0, n5) in zip(grown, want):
        assert (g["norm_0"], g["norm_5"]) == pytest.approx((n0, n5), rel=1e-9)
    # 3: what each rank wrote, what dedup saved, nothing lost
    [written] = query(out, q3)
    sizes = {s: sum(r["bytes"] for r in rows if r["status"] == s) for s in ("written", "linked")}
    assert (written["tensors"], written["lost"]) == (len(rows), 0)
    assert written["written_mib"] == pytest.approx(sizes["written"] / 2**20)
    assert written["deduplicated_mib"] == pytest.approx(sizes["linked"] / 2**20)

    # statistic_extra.csv has the counts; statistic.csv stays msProbe's for task
    # tensor: no statistics, and the very bytes of a dump whose records have none
    csvs = sorted(data.glob("*/*/statistic.csv"))
    pinf = 0
    for stat in csvs:
        with open(stat, newline="") as f, \
                open(stat.with_name("statistic_extra.csv"), newline="") as g:
            for row, extra in zip(csv.DictReader(f), csv.DictReader(g)):
                assert [row[c] for c in TARGET] == ["N/A"] * 4
                pinf += int(extra["Pos Inf Count"])
    assert pinf == sum(r["pinf"] for r in rows)
    before = {p: p.read_bytes() for p in csvs}
    for log in (root / ".probe" / "records").glob("*.jsonl"):
        log.write_text(re.sub(r'"stats":\{[^}]*\}', '"stats":null', log.read_text()))
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "rebuild", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert {p: p.read_bytes() for p in csvs} == before
