"""The shim says when a round has all its records (a `round` record), so the
control plane completes it, and lets go of its rows, while the process runs on
(a busy service's daemon once kept every row)."""

from __future__ import annotations

import json

from robust_helpers import SMALL, records, run_atbsim, wait_daemon_gone

CONFIG = {"task": "statistics", "dump_enable": True, "exec_range": "all", "save_child": True}


def test_each_round_the_host_left_is_announced_after_its_records(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    r = run_atbsim(out, config, *SMALL, "--requests", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    recs = records(out / "atb_dump_data")
    last_tensor: dict[str, int] = {}
    announced: dict[str, int] = {}
    # Prefill and decode rounds of one number share a round dir (prefill round 2
    # runs after decode round 3 here), so a dir announced complete can be entered
    # again and announced again: never twice with no tensor of it in between.
    entered_again: set[str] = set()
    for i, rec in enumerate(recs):
        if rec["k"] == "tensor":
            key = "/".join(rec["path"].split("/")[:2])
            last_tensor[key] = i
            entered_again.add(key)
        elif rec["k"] == "round":
            key = rec["round"]
            assert key not in announced or key in entered_again, f"{key} announced twice"
            assert key in last_tensor and last_tensor[key] < i, f"{key} announced early"
            announced[key] = i
            entered_again.discard(key)
    rounds = sorted(last_tensor, key=lambda k: int(k.split("/")[1]))
    assert len(rounds) >= 3
    # every round but the one the process ended in; each after its last tensor
    assert sorted(announced) == sorted(rounds[:-1])
    assert all(announced[k] > last_tensor[k] for k in announced)
