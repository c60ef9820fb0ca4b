"""Derived files exist when the dumping process exits: its exit
waits, bounded, until the control plane has written its statistic.csv, info/
and round markers, so `model && msprobe-atb compare ...` works, as with msProbe.
When the control plane does not get there in time, the process says so."""

from __future__ import annotations

import csv
import json
import os
import signal

from robust_helpers import SMALL, records, run_atbsim, status_now
from testkit import wait_until

CONFIG = {"task": "statistics", "dump_enable": True, "exec_range": "all", "save_child": True}


def test_derived_files_exist_when_the_process_has_exited(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    r = run_atbsim(out, config, *SMALL, "--requests", "2")
    # at once, as a shell's `&&` would: nothing waits for the daemon here
    root = out / "atb_dump_data"
    tensors = [rec for rec in records(root) if rec["k"] == "tensor"]
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MSPROBE_ATB_EXIT_BUILD_MS" not in r.stderr
    rounds = {"/".join(rec["path"].split("/")[:2]) for rec in tensors}
    rows = 0
    for key in rounds:
        d = root / "data" / key
        marker = json.loads((d / "ROUND_COMPLETE.json").read_text())
        with open(d / "statistic.csv", newline="") as f:
            n = len(list(csv.reader(f))) - 1
        assert marker["rows"] == n
        rows += n
    assert rows == len(tensors)
    pid = tensors[0]["path"].split("/")[0]
    assert list((root / "info" / "layer" / pid).glob("*.json"))
    assert list((root / "info" / "model" / pid).glob("*.json"))


def test_a_process_says_when_it_stops_waiting(tmp_path, services):
    """A control plane that cannot build in time (stopped here): the exit waits
    MSPROBE_ATB_EXIT_BUILD_MS, then says so; the files follow once it runs."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(CONFIG))
    svc = services(out, devices=1, MSPROBE_ATB_EXIT_BUILD_MS="300")
    svc.request()
    daemon = status_now(out)["daemon"]["pid"]
    os.kill(daemon, signal.SIGSTOP)
    try:
        svc.stop()
        assert svc.count(r"within 300 ms \(MSPROBE_ATB_EXIT_BUILD_MS\)") == 1, svc.lines[-20:]
    finally:
        os.kill(daemon, signal.SIGCONT)
    root = out / "atb_dump_data"
    wait_until(lambda: list((root / "data").glob("*/*/ROUND_COMPLETE.json")), timeout=60,
               what="the round markers once the control plane runs again")
