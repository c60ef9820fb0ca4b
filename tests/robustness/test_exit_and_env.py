"""Process exit with a full queue and no time to drain it, and hostile values of the
environment the shim reads: the host always runs to the end, and every selected
tensor is accounted for (written or recorded as lost)."""

from __future__ import annotations

import json

import pytest
from robust_helpers import (
    DUMP_ALL,
    SMALL,
    assert_readable_tree,
    no_compute_model,
    records,
    run_atbsim,
    status,
    wait_daemon_gone,
)

BIG = no_compute_model(requests=3)


@pytest.fixture(scope="module")
def undrained(tmp_path_factory):
    """A run that exits with its queue full and MSPROBE_ATB_EXIT_DRAIN_S=0."""
    base = tmp_path_factory.mktemp("undrained")
    out = base / "out"
    config = base / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    r = run_atbsim(out, config, *BIG, MSPROBE_ATB_EXIT_DRAIN_S="0", MSPROBE_ATB_WRITERS="1")
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    return out, r, records(out / "atb_dump_data"), status(out)


def _lost(recs, kind: str) -> int:
    return sum(x["k"] == kind and x["file"] == "lost" for x in recs)


def test_exit_without_drain_time_records_every_loss(undrained):
    out, r, recs, st = undrained
    (proc,) = st["processes"]
    (exit_rec,) = [x for x in recs if x["k"] == "exit"]
    tensors = [x for x in recs if x["k"] == "tensor"]
    assert proc["exited"]
    assert len(tensors) == proc["tensors_selected"] == exit_rec["tensors_selected"]
    assert len(tensors) - _lost(recs, "tensor") == proc["tensors_written"]
    assert exit_rec["drained"] == (exit_rec["lost"] == 0)
    if exit_rec["lost"]:
        assert "were not written within 0 s" in r.stderr
    # Every lost tensor has its record.
    assert _lost(recs, "tensor") == proc["errors"] + proc["drops"]
    assert assert_readable_tree(out / "atb_dump_data") == len(tensors)


def test_status_balances_after_exit_losses(undrained):
    _, _, recs, st = undrained
    (proc,) = st["processes"]
    (exit_rec,) = [x for x in recs if x["k"] == "exit"]
    assert _lost(recs, "tensor") > 0
    assert exit_rec["lost"] == _lost(recs, "tensor")
    assert proc["tensors_selected"] == proc["tensors_written"] + proc["errors"] + proc["drops"]
    assert st["all_written"]


@pytest.mark.parametrize("extra", [
    {"MSPROBE_ATB_WRITERS": "0", "MSPROBE_ATB_EXIT_DRAIN_S": "-1",
     "MSPROBE_ATB_ATTACH_WAIT_MS": "nan"},
    {"MSPROBE_ATB_WRITERS": "99999999999999999999", "MSPROBE_ATB_EXIT_DRAIN_S": "1e9",
     "MSPROBE_ATB_ATTACH_WAIT_MS": "12abc"},
    {"MSPROBE_ATB_WRITERS": "2x", "MSPROBE_ATB_EXIT_DRAIN_S": " 5",
     "MSPROBE_ATB_ATTACH_WAIT_MS": "99999999999"},
    {"MSPROBE_ATB_PYTHON": "/nonexistent/python", "MSPROBE_ATB_ATTACH_WAIT_MS": "300"},
    {"ATB_OUTPUT_DIR": "/" + "x" * 5000},
    {"ATB_OUTPUT_DIR": "/dev/null/out"},
    {"ATB_DUMP_CONFIG": "/" + "y/" * 3000 + "config.json"},
], ids=["writers0", "overflowing", "junk", "no-python", "long-out", "out-under-file",
        "long-config"])
def test_hostile_environment_values(tmp_path, extra):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    r = run_atbsim(out, config, *SMALL, timeout=60, **extra)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tokens" in r.stdout
    if any(k.startswith("ATB_") for k in extra):
        assert "will not dump" in r.stderr, r.stderr[-2000:]
    elif "MSPROBE_ATB_PYTHON" not in extra:
        wait_daemon_gone(out)
        (proc,) = status(out)["processes"]
        recs = records(out / "atb_dump_data")
        assert proc["exited"] and proc["tensors_selected"] > 0
        assert sum(x["k"] == "tensor" for x in recs) == proc["tensors_selected"]
        assert _lost(recs, "tensor") == proc["errors"] + proc["drops"]
