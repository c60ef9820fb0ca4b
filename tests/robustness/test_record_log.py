"""Damaged record logs: a last line cut by a crash, garbage appended, a record glued
to a cut one (a write cut short by a full disk, then room again), records naming
paths outside the dump. `rebuild` keeps every intact record, writes nothing
outside atb_dump_data and says what it skipped."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from robust_helpers import (
    SMALL,
    assert_readable_tree,
    cli,
    derived_files,
    record_logs,
    run_atbsim,
    wait_daemon_gone,
)

CONFIG = {"task": "all", "dump_enable": True, "exec_range": "0", "ids": "1", "op_name": "",
          "save_child": True, "device": "", "filter_level": 1}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    base = tmp_path_factory.mktemp("records")
    out = base / "out"
    config = base / "config.json"
    config.write_text(json.dumps(CONFIG))
    r = run_atbsim(out, config, *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    return out


@pytest.fixture
def dump(pristine, tmp_path):
    """A private copy of the dump, its record log and its tree as the daemon left it."""
    out = tmp_path / "out"
    shutil.copytree(pristine, out, symlinks=True)
    (log,) = record_logs(out / "atb_dump_data")
    # As if the dump had been made here: the attach record names the output root.
    log.write_bytes(log.read_bytes().replace(json.dumps(str(pristine)).encode(),
                                             json.dumps(str(out)).encode()))
    _rebuild(out)
    return out, log, derived_files(out / "atb_dump_data")


def _rebuild(out):
    r = cli("rebuild", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr


def _lines(log) -> list[bytes]:
    return log.read_bytes().splitlines(keepends=True)


def test_last_line_cut_by_a_crash(dump):
    out, log, _ = dump
    lines = _lines(log)
    tensors = [i for i, x in enumerate(lines) if b'"k":"tensor"' in x]
    last = tensors[-1]
    log.write_bytes(b"".join(lines[:last]) + lines[last][: len(lines[last]) // 2])
    _rebuild(out)
    root = out / "atb_dump_data"
    assert assert_readable_tree(root) == len(tensors) - 1


def test_garbage_lines_are_skipped_and_reported(dump):
    out, log, before = dump
    with open(log, "ab") as f:
        f.write(b"\x00\xff not json at all\n")
        f.write(b"[1, 2, 3]\n")
        f.write(b"[" * 100000 + b"]" * 100000 + b"\n")
        f.write(b'{"k":"tensor","seq":"x","path":null}\n')
        f.write(b'{"k":"graph","name":"../../../escaped","dev":0,"json":"{}"}\n')
        f.write(b'{"k":"topo","model":"/abs","dev":0,"json":"{]"}\n')
    err = _rebuild(out)
    assert log.name in err and "unreadable" in err
    root = out / "atb_dump_data"
    assert derived_files(root) == before
    assert not list(out.parent.rglob("escaped*")) and not list(out.parent.rglob("abs.json"))


def test_record_glued_to_a_cut_one_is_kept(dump):
    out, log, before = dump
    lines = _lines(log)
    i = next(i for i, x in enumerate(lines) if b'"k":"tensor"' in x)
    cut = lines[i + 1][:37]  # a write cut short: no newline; the next record follows it
    log.write_bytes(b"".join(lines[: i + 1]) + cut + b"".join(lines[i + 1:]))
    _rebuild(out)
    assert derived_files(out / "atb_dump_data") == before


def test_tensor_records_naming_paths_outside(dump):
    out, log, _ = dump
    rec = {"k": "tensor", "t": 1, "seq": 10**6, "format": 2, "dtype": 1, "dims": "1",
           "size": 2, "task": "all", "file": "lost", "stats": None, "note": "forged"}
    bad = ["../../../outside/0/1_A/before/intensor0.bin", "/etc/0/1_A/before/intensor0.bin",
           "0_1/../../../../outside/before/x.bin", "0_1/0/1_A/before/\n.bin", ""]
    with open(log, "ab") as f:
        for path in bad:
            f.write(json.dumps({**rec, "path": path}).encode() + b"\n")
    _rebuild(out)
    root = out / "atb_dump_data"
    assert not list(out.parent.rglob("outside"))
    for stat in (root / "data").rglob("statistic.csv"):
        assert stat.resolve().is_relative_to(root.resolve())
    assert_readable_tree(root)


def test_things_named_like_logs_that_are_no_files(dump):
    """A FIFO, a directory and a device named like record logs: `rebuild` must
    neither hang (opening a FIFO blocks) nor fail."""
    out, log, before = dump
    os.mkfifo(log.with_name("1-1.jsonl"))
    log.with_name("2-2.jsonl").mkdir()
    log.with_name("3-3.jsonl").symlink_to("/dev/zero")
    r = cli("rebuild", str(out), timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert derived_files(out / "atb_dump_data") == before
