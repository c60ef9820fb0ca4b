"""What `status` says, in words that never contradict each other, and the live
`--watch` view in a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

from test_daemon import LAYER2, block_of, cli
from testkit import REPO, save_config, wait_until


def _status(out_dir, env) -> str:
    return cli("status", str(out_dir), env=env).stdout


def test_asleep_says_why(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, dump_enable=False)
    shims(out_dir, dev=0, config=cfg)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    assert f'asleep: "dump_enable" is false in {cfg}' in _status(out_dir, daemon_env)
    cfg.unlink()
    wait_until(lambda: "does not exist" in _status(out_dir, daemon_env), timeout=20,
               what="status to notice the deleted config")
    assert f"the config file {cfg} does not exist" in _status(out_dir, daemon_env)


def test_progress_words_agree(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=1, config=cfg)
    for name, value in (("tensors_selected", 4), ("tensors_written", 4), ("ops_seen", 9)):
        shim.block.set_proc_counter(shim.slot, name, value)
    (out_dir / "atb_dump_data" / "data" / f"1_{shim.pid}" / "0").mkdir(parents=True)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    text = _status(out_dir, daemon_env)
    assert "everything selected so far has been written" in text
    assert "0 marked complete" in text and "1 still open: a round is marked once" in text
    assert "last activity" not in text and "last tensor written" in text


def test_no_tensor_written_is_not_given_a_time(out_dir, shims, daemons, daemon_env):
    """Issue 18 §3: a process that wrote records (its hello, graphs) but no tensor."""
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=0, config=cfg)
    shim.block.set_proc_counter(shim.slot, "last_activity_ns", time.time_ns() - 7_600_000_000)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    text = _status(out_dir, daemon_env)
    assert "tensors 0/0 written (0 B)" in text and ", no tensor written" in text
    assert "last tensor written" not in text


def test_watch_refreshes_in_place(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=1, config=cfg)
    shim.block.set_proc_counter(shim.slot, "tensors_selected", 8)
    shim.block.set_proc_counter(shim.slot, "tensors_written", 2)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    leader, follower = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "msprobe_atb", "status", str(out_dir), "--watch",
                          "--interval", "0.2", "--count", "3"], stdout=follower,
                         stderr=subprocess.PIPE, cwd=REPO, env=daemon_env)
    os.close(follower)
    screen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            if p.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    assert p.wait(timeout=30) == 0, p.stderr.read()
    os.close(leader)
    text = screen.decode()
    assert text.count("\x1b[H\x1b[2J") == 3  # three frames, each drawn over the last
    assert f"pid {shim.pid:>7} dev 1" in text and "[######------------------] 2/8 tensors" in text
    assert "still writing" in text
