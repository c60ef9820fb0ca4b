"""SIGKILL of the inference process in the middle of a big dump: the daemon notices,
and its tree (equal to `rebuild`'s) has rows only for complete files; every .bin
parses; the offline tools read the crashed dump."""

from __future__ import annotations

import json
import signal
import subprocess

from robust_helpers import (
    DUMP_ALL,
    assert_readable_tree,
    atbsim_cmd,
    cli,
    derived_files,
    no_compute_model,
    probe_env,
    rebuild,
    record_logs,
    records,
    status,
    temp_files,
    wait_daemon_gone,
)
from testkit import wait_until

from msprobe_atb.tree.record_schema import problems

# Many rounds, so the queue is full of copies when the process is killed.
BIG = no_compute_model(requests=40)


def _record_lines(root) -> int:
    return sum(f.read_bytes().count(b"\n") for f in record_logs(root))


def test_sigkill_mid_dump(tmp_path):
    out = tmp_path / "out"
    root = out / "atb_dump_data"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    # One writer thread, so that the queue backs up behind it.
    proc = subprocess.Popen(atbsim_cmd(*BIG), env=probe_env(out, config, MSPROBE_ATB_WRITERS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: proc.poll() is not None or _record_lines(root) > 600, timeout=60,
                   what="600 records")
        assert proc.poll() is None, "the run finished before it could be killed; make BIG bigger"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    wait_daemon_gone(out)

    # The live tree, left by the daemon, already keeps the promises...
    live = derived_files(root)
    recs = records(root)
    # it really died mid-run: its only exit record is the daemon's, for a killed process
    assert [r.get("killed") for r in recs if r["k"] == "exit"] == [True]
    assert [p for r in recs if r["k"] == "exit" for p in problems(r, "control plane")] == []
    tensors = [r for r in recs if r["k"] == "tensor"]
    stray = temp_files(root / "data")
    # A writer killed mid-file leaves its temporary; it is never named like a tensor.
    assert all(not p.name.endswith(".bin") for p in stray)
    for p in stray:
        p.unlink()
    assert assert_readable_tree(root) == len(tensors)
    # ...and equals what `rebuild` makes of the record logs.
    rebuild(out)
    assert derived_files(root) == live
    written = {r["path"] for r in tensors if r["file"] == "bin"}
    on_disk = {str(p.relative_to(root / "data")) for p in (root / "data").rglob("*.bin")}
    assert written <= on_disk
    # The rounds the process never finished are not marked complete by a guess:
    # the process is dead, so each round is as complete as it will ever be.
    # A round may hold only tensors that died in the queue: no rows, all lost.
    for marker in (root / "data").glob("*/*/ROUND_COMPLETE.json"):
        m = json.loads(marker.read_text())
        assert m["rows"] > 0 or m["lost"] == m["lost_without_row"] > 0, m
    # `status` says the process is gone and what it took with it, and does not
    # keep anyone waiting for writes that will never happen.
    st = status(out)
    (p,) = st["processes"]
    assert not p["alive"] and not p["exited"]
    assert p["lost_at_death"] == (p["tensors_selected"] - p["tensors_written"] - p["errors"]
                                  - p["drops"])
    assert st["all_written"]
    if p["lost_at_death"]:
        assert f"LOST: {p['lost_at_death']} selected tensors" in cli("status", str(out)).stdout
    # The round markers count that loss too, in the rounds it hit:
    # the lost rows plus the tensors that died in the queue, without a row.
    markers = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/ROUND_COMPLETE.json")]
    lost_rows = sum(r["file"] == "lost" for r in tensors)
    assert sum(m["lost"] for m in markers) == lost_rows + p["lost_at_death"]
    assert sum(m.get("lost_without_row", 0) for m in markers) == p["lost_at_death"]
    assert p["lost_at_death"] > 0, "the kill should leave queued tensors behind"
    r = cli("stats", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
