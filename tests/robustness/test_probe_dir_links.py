"""Links planted under the output dir never redirect a write outside the dump
tree: every file of .probe is opened from a verified
directory fd with O_NOFOLLOW, temporaries with O_EXCL, on both sides (shim and
daemon); a dump root that is itself a symlink is resolved once and said so."""

from __future__ import annotations

import json
import os

from robust_helpers import DUMP_ALL, probe_host, records, wait_daemon_gone

SAVE = b"save\t2\t1\t1\thex:003c\t0_7/0/2_Layer/before/intensor0.bin\n"
PRECIOUS = b"precious\n"


def _setup(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    outside = tmp_path / "outside"
    outside.mkdir()
    return out, config, outside


def _dumped(root) -> bool:
    return (root / "data" / "0_7" / "0" / "2_Layer" / "before" / "intensor0.bin").is_file() and \
        (root / "data" / "0_7" / "0" / "statistic.csv").is_file()


def test_links_planted_in_probe_dir_are_replaced_not_followed(tmp_path):
    out, config, outside = _setup(tmp_path)
    probe = out / "atb_dump_data" / ".probe"
    (probe / "records").mkdir(parents=True)
    log_target, lock_target, forged = outside / "log", outside / "lock", outside / "forged.jsonl"
    log_target.write_bytes(PRECIOUS)
    lock_target.write_bytes(PRECIOUS)
    forged.write_text(json.dumps({"k": "tensor", "seq": 0, "path": "0_9/0/1_X/before/a.bin",
                                  "file": "bin", "stats": None}) + "\n")
    os.symlink(log_target, probe / "daemon.log")
    os.symlink(lock_target, probe / "daemon.lock")  # used to keep the daemon from starting
    os.symlink(forged, probe / "records" / "99999-1.jsonl")
    r = probe_host(out, config, SAVE)
    assert r.returncode == 0, r.stderr[-2000:]
    err = r.stderr.decode()
    assert "has not published" not in err, "the daemon did not come up: " + err
    wait_daemon_gone(out)
    root = out / "atb_dump_data"
    assert _dumped(root)
    assert log_target.read_bytes() == PRECIOUS and lock_target.read_bytes() == PRECIOUS
    for name in ("daemon.log", "daemon.lock"):
        assert not (probe / name).is_symlink() and (probe / name).is_file()
    log = (probe / "daemon.log").read_text()
    assert "started for" in log and "replaced it" in log
    assert "daemon.log was a link" in err
    # the forged "record log" behind a link was never read
    assert not (root / "data" / "0_9").exists()
    assert [x["k"] for x in records(root) if x.get("pid")] == ["attach"]  # the host's own log


def test_probe_dir_that_is_a_symlink_is_refused(tmp_path):
    out, config, outside = _setup(tmp_path)
    (out / "atb_dump_data").mkdir(parents=True)
    os.symlink(outside, out / "atb_dump_data" / ".probe")
    r = probe_host(out, config, SAVE)
    assert r.returncode == 0
    err = r.stderr.decode()
    assert ".probe is a symlink or not a directory: remove it" in err and "will not dump" in err
    assert list(outside.iterdir()) == []  # no control.block, no record log at the target
    assert not (out / "atb_dump_data" / "data").exists()


def test_hard_link_at_the_block_temporary_is_not_written_through(tmp_path):
    """control.c is the shim's and the daemon's: a file hard-linked under the
    name of the block's temporary must not be truncated and overwritten."""
    from msprobe_atb.control.block import ControlBlock

    _, _, outside = _setup(tmp_path)
    probe = tmp_path / "root" / ".probe"
    probe.mkdir(parents=True)
    victim = outside / "victim"
    victim.write_bytes(PRECIOUS)
    os.link(victim, probe / f".control.{os.getpid()}.tmp")
    with ControlBlock(tmp_path / "root", create=True) as block:
        assert block.procs() == []
    assert victim.read_bytes() == PRECIOUS
    assert os.stat(probe / "control.block").st_nlink == 1


def test_dump_root_that_is_a_symlink_is_resolved_once_and_said(tmp_path):
    out, config, outside = _setup(tmp_path)
    out.mkdir()
    real = outside / "real_dump"
    real.mkdir()
    os.symlink(real, out / "atb_dump_data")
    r = probe_host(out, config, SAVE)
    assert r.returncode == 0, r.stderr[-2000:]
    err = r.stderr.decode()
    assert f"{out}/atb_dump_data is a symlink: dumping into its target {real}" in err
    wait_daemon_gone(out)
    assert _dumped(real)
    assert f"serving its target {real}" in (real / ".probe" / "daemon.log").read_text()
