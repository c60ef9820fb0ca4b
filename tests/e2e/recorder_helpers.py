"""Helpers of the flight-recorder tests: a service armed with a recorder block,
the round directories it leaves, the incidents as `msprobe-atb incidents`
prints them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from testkit import REPO, save_config, wait_until

# Layer-level ops and every child op and kernel, as README's recorder example.
ARMED = {"task": "tensor", "dump_enable": True, "exec_range": "all", "ids": "",
         "save_child": True}
FAST = "--no-compute --hidden 32 --heads 2 --prompt-len 4"


def arm(config: Path, **recorder: Any) -> None:
    save_config(config, **ARMED, recorder={"keep_rounds": 3, "after_rounds": 1,
                                           "max_incidents": 1, **recorder})


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], cwd=REPO, check=check,
                          capture_output=True, text=True, timeout=120)


def incidents(out: Path) -> list[dict]:
    """What `incidents --json` prints, read in-process (tests poll it)."""
    from msprobe_atb.tree.incidents import read_incidents

    return read_incidents(out / "atb_dump_data")


def rounds_on_disk(out: Path) -> dict[str, set[int]]:
    """{dev_pid: {round, ...}} of the data tree."""
    data = out / "atb_dump_data" / "data"
    if not data.is_dir():
        return {}
    return {p.name: {int(r.name) for r in p.iterdir() if r.is_dir()}
            for p in data.iterdir() if p.is_dir()}


def op_rounds(out: Path) -> dict[tuple[str, str], set[int]]:
    """{(dev_pid, "{id}_{Name}" of a top-level op): {round, ...}} of the data tree."""
    found: dict[tuple[str, str], set[int]] = {}
    for proc, rounds in rounds_on_disk(out).items():
        for r in rounds:
            for op in (out / "atb_dump_data" / "data" / proc / str(r)).iterdir():
                if op.is_dir():
                    found.setdefault((proc, op.name), set()).add(r)
    return found


def wait_complete(out: Path, want: int, timeout: float = 60, incident: bool = True) -> None:
    """Until `want` round dirs carry ROUND_COMPLETE.json (and an incident report
    exists)."""
    data = out / "atb_dump_data" / "data"

    def done():
        marks = list(data.glob("*/*/ROUND_COMPLETE.json")) if data.is_dir() else []
        return len(marks) >= want and (
            not incident or any((out / "atb_dump_data" / "incidents").glob("*.json")))

    wait_until(done, timeout=timeout, what=f"{want} complete rounds and an incident report")


def status(out: Path) -> dict[str, Any]:
    """What `status --json` prints, collected in-process (tests poll it)."""
    from msprobe_atb.status import collect

    return json.loads(json.dumps(collect(out / "atb_dump_data")))


def rearm(config: Path, out: Path, **recorder: Any) -> None:
    """Edits the recorder block and waits until the daemon published it and every
    live process applied it."""
    before = status(out)["generation"]
    arm(config, **recorder)

    def applied():
        st = status(out)
        procs = [p for p in st["processes"] if p["alive"]]
        return st["generation"] != before and procs and all(
            p["config_generation"] == st["generation"] for p in procs)

    wait_until(applied, what="the processes to apply the new config")


def wait_incident(out: Path, n: int, rounds: list[int]) -> list[dict]:
    """Until incident report n (from 1) lists `rounds` as written."""
    def done():
        docs = incidents(out)
        return docs if len(docs) >= n and docs[n - 1]["flushed_rounds"] == rounds else None

    return wait_until(done, what=f"incident {n} with rounds {rounds}")


def csv_rows(out: Path) -> dict[tuple[str, str], dict[str, int]]:
    """{(dev_pid, round): {top-level op dir: statistic.csv rows}}."""
    import csv

    found: dict[tuple[str, str], dict[str, int]] = {}
    for f in (out / "atb_dump_data" / "data").glob("*/*/statistic.csv"):
        ops = found.setdefault((f.parent.parent.name, f.parent.name), {})
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                top = f"{row['Op Id'].split('_')[0]}_{row['Op Name'].split('/')[0]}"
                ops[top] = ops.get(top, 0) + 1
    return found
