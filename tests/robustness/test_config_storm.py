"""Config storms while a service handles requests: rapid edits alternating valid,
invalid, deleted, replaced by a directory, a FIFO, binary garbage and huge files.
The service never stalls or crashes, `status` stays readable, a bad edit is refused
with a message naming the file while the last good config stays in force, and the
final state is the last valid edit."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from robust_helpers import cli, status, status_now
from testkit import save_config, wait_until

BASE = {"task": "statistics", "dump_enable": True, "exec_range": "all", "op_name": "",
        "save_child": False, "device": "", "queue_budget_mb": 4}


def _clear(cfg: Path) -> None:
    if cfg.is_dir() and not cfg.is_symlink():
        shutil.rmtree(cfg)
    elif cfg.exists() or cfg.is_symlink():
        cfg.unlink()


def _write(cfg: Path, data: bytes) -> None:
    tmp = cfg.with_name(".config.tmp")
    tmp.write_bytes(data)
    _clear(cfg)
    os.replace(tmp, cfg)


def valid(cfg: Path, ids: str) -> None:
    _clear(cfg)
    save_config(cfg, **BASE, ids=ids)


BAD = {
    "syntax": lambda cfg: _write(cfg, b'{"dump_enable": true,'),
    "type": lambda cfg: _write(cfg, b'{"dump_enable": "yes", "task": "tensors"}'),
    "binary": lambda cfg: _write(cfg, bytes(range(256)) * 4),
    "surrogate": lambda cfg: _write(cfg, b'{"dump_enable": true, "op_name": "\\udcff"}'),
    "deep": lambda cfg: _write(cfg, b'{"dump_enable": true, "x": ' + b"[" * 100000
                               + b"]" * 100000 + b"}"),
    "directory": lambda cfg: (_clear(cfg), cfg.mkdir()),
    "fifo": lambda cfg: (_clear(cfg), os.mkfifo(cfg)),
    "huge": lambda cfg: (_clear(cfg), open(cfg, "wb").truncate(17 << 20)),
    "device": lambda cfg: (_clear(cfg), os.symlink("/dev/zero", cfg)),
    "loop": lambda cfg: (_clear(cfg), os.symlink(cfg.name, cfg)),
}


@pytest.fixture
def busy_service(tmp_path, services):
    """A service with a thread sending requests all the time; yields (service, out,
    errors) and checks at teardown that no request failed."""
    out = tmp_path / "out"
    out.mkdir()
    valid(out / "config.json", "1")
    svc = services(out)
    stop = threading.Event()
    errors: list[BaseException] = []

    def load() -> None:
        while not stop.is_set():
            try:
                svc.request(max_tokens=2)
            except BaseException as exc:
                errors.append(exc)
                return

    t = threading.Thread(target=load, daemon=True)
    t.start()
    yield svc, out, errors
    stop.set()
    t.join(timeout=60)
    assert not errors, f"a request failed: {errors[0]!r}"
    assert svc.proc.poll() is None, "the service died"


def _in_force(out: Path) -> tuple[str, str, str]:
    """(state, ids, rejected edit) as `status` shows them."""
    st = status_now(out)
    return st["config"]["state"], st["config"]["ids"], st["rejected_edit"]


def test_each_bad_edit_is_refused_and_the_good_one_stays(busy_service):
    svc, out, errors = busy_service
    cfg = out / "config.json"
    for n, kind in enumerate(sorted(BAD)):
        ids = str(100 + n)
        valid(cfg, ids)  # a good edit clears the previous error and applies
        wait_until(lambda i=ids: _in_force(out) == ("awake", i, ""), timeout=30,
                   what=f"ids {ids} in force")
        BAD[kind](cfg)
        state, in_force, rejected = wait_until(
            lambda: (v := _in_force(out))[2] and v, timeout=30,
            what=f"the {kind} edit to be refused in `status`")
        assert (state, in_force) == ("awake", ids), kind
        assert rejected.startswith(f"{cfg}: "), rejected
        assert svc.wait_line(r"config rejected \(pid \d+, device \d+\), keeping the previous "
                             "one:", count=n + 1)
    assert not errors
    assert "REJECTED EDIT" in cli("status", str(out)).stdout


def test_storm_of_200_edits(busy_service):
    svc, out, errors = busy_service
    cfg = out / "config.json"
    kinds = sorted(BAD)
    for i in range(200):
        if i % 2 == 0:
            valid(cfg, str(10 + i))
        elif i % 3 == 0:
            _clear(cfg)
        else:
            BAD[kinds[i % len(kinds)]](cfg)
        if i % 40 == 0:
            status(out)  # readable in the middle of the storm
        assert not errors and svc.proc.poll() is None
    valid(cfg, "7")
    wait_until(lambda: _in_force(out) == ("awake", "7", ""), timeout=30,
               what="the last valid edit in force")
    # ...and applied by the worker, which keeps answering.
    gen = status(out)["generation"]
    svc.request(max_tokens=2)
    wait_until(lambda: all(p["config_generation"] >= gen
                           for p in status_now(out)["processes"] if p["alive"]),
               what="the worker to apply the last edit")


def test_same_size_edit_with_the_same_mtime(tmp_path, services):
    """Two quick in-place edits of the same size on a file system with coarse
    timestamps (NFS, a kernel tick) leave (mtime, size, inode) unchanged: the
    second one must still be seen. The coarse clock is played with os.utime."""
    out = tmp_path / "out"
    out.mkdir()
    cfg = out / "config.json"
    valid(cfg, "4")
    # written long before the daemon reads it, as on a machine that is slow to start
    # the service: the "modified just after our read" rule cannot catch the edit, the
    # file event must
    old_ns = time.time_ns() - 60_000_000_000
    os.utime(cfg, ns=(old_ns, old_ns))
    svc = services(out)
    wait_until(lambda: _in_force(out) == ("awake", "4", ""), what="ids 4 in force")
    before = os.stat(cfg)
    text = cfg.read_text()
    assert '"4"' in text
    with open(cfg, "r+") as f:  # in place, as `>` or some editors do
        f.write(text.replace('"4"', '"5"'))
    os.utime(cfg, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(cfg)
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns, before.st_size, before.st_ino)
    wait_until(lambda: _in_force(out) == ("awake", "5", ""), timeout=15,
               what="the same-size, same-mtime edit to apply")
    svc.request(max_tokens=2)
