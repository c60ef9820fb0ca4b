"""The daemon against a fake shim: publishing, sleep/wake, bad edits, single
instance, exit rules, SIGKILL + restart, --stop, status."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from cp_helpers import derived
from testkit import REPO, save_config, wait_until

from msprobe_atb.control.block import ControlBlock
from msprobe_atb.tree import progress
from msprobe_atb.tree.drain import rebuild

WAKE = {"dump_enable": True, "exec_range": "none"}
LAYER2 = {"dump_enable": True, "exec_range": "all", "ids": "2"}


def block_of(out_dir) -> ControlBlock:
    path = out_dir / "atb_dump_data" / ".probe" / "control.block"
    wait_until(path.exists, what="the control block")
    return ControlBlock(out_dir / "atb_dump_data")


def config_of(block):
    return block.read_config()[1]


def handled(out_dir, cfg) -> bool:
    """The daemon has judged the config file as it is now (applied or refused it)."""
    built = progress.read(out_dir / "atb_dump_data")
    return built is not None and built.config_sha256 in progress.config_tokens(str(cfg))


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-c",
                           "import sys;"
                           "from msprobe_atb import status; from msprobe_atb.daemon import cli;"
                           "import argparse; p = argparse.ArgumentParser(); s = p.add_subparsers();"
                           "status.register(s); cli.register(s); a = p.parse_args(sys.argv[1:]);"
                           "sys.exit(a.func(a))", *args],
                          capture_output=True, text=True, cwd=REPO, env=env)


@pytest.mark.parametrize("mode", ["events", "poll_only"])
def test_edits_are_published(out_dir, daemons, daemon_env, mode):
    if mode == "events":
        daemon_env["MSPROBE_ATB_POLL_S"] = "60"  # an edit seen within the wait came by event
    else:
        daemon_env["MSPROBE_ATB_NO_EVENTS"] = "1"
        daemon_env["MSPROBE_ATB_POLL_S"] = "0.5"
    cfg = out_dir / "config.json"
    save_config(cfg, **WAKE)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
        c = config_of(block)
        assert (c.state, c.exec_mode) == (1, 0)
        assert block.config_path == str(cfg)
        save_config(cfg, **LAYER2)
        wait_until(lambda: config_of(block).ids == ("2",), timeout=15, what="ids 2 published")
        assert config_of(block).exec_mode == 1
        save_config(cfg, dump_enable=False)
        wait_until(lambda: config_of(block).state == 0, timeout=15, what="asleep")
        watching = "watching" in (out_dir / "atb_dump_data/.probe/daemon.log").read_text()
        assert watching == (mode == "events")


def test_bad_edit_keeps_previous_config_and_reports_once(out_dir, daemons, daemon_env):
    daemon_env["MSPROBE_ATB_POLL_S"] = "0.2"
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    d = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: config_of(block).ids == ("2",), what="the first config")
        gen = block.generation
        save_config(cfg, raw='{"dump_enable": true, "exec_range": "3,1", "ids": "2"}')
        wait_until(lambda: block.error, timeout=15, what="the error in the block")
        assert '"exec_range": "3,1" is reversed' in block.error
        assert block.error_seq == 1
        # new content, the same problem: once the daemon has judged it (built.json
        # names it), it has not reported the problem again
        save_config(cfg, raw='{"dump_enable": true, "exec_range": "3,1",  "ids": "2"}')
        wait_until(lambda: handled(out_dir, cfg), timeout=15, what="the edit judged")
        assert block.generation == gen and config_of(block).ids == ("2",)
        assert block.error_seq == 1
        assert d.log_text.count("config rejected") == 1
        assert "keeping the previous config" in d.log_text
        r = cli("status", str(out_dir))
        assert "REJECTED EDIT" in r.stdout and "3,1" in r.stdout and '"ids": "2"' in r.stdout
        save_config(cfg, dump_enable=True, exec_range="all", ids="3")
        wait_until(lambda: config_of(block).ids == ("3",), timeout=15, what="the good edit")
        assert block.error == ""
        save_config(cfg, raw="{broken")
        wait_until(lambda: block.error_seq == 2, timeout=15, what="the second error")
        assert "not valid JSON at line 1" in block.error


def test_never_valid_config_is_asleep_and_deleted_config_sleeps(out_dir, daemons, daemon_env):
    cfg = out_dir / "config.yaml"
    save_config(cfg, raw="dump_enable: yes please\n")
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
        assert config_of(block).state == 0 and "dump_enable" in block.error
        save_config(cfg, raw="dump_enable: true\nexec_range: all\n")
        wait_until(lambda: config_of(block).state == 1, timeout=15, what="awake")
        cfg.unlink()
        wait_until(lambda: config_of(block).state == 0, timeout=15, what="asleep after delete")


def test_missing_config_at_start_then_created(out_dir, daemons, daemon_env):
    cfg = out_dir / "later.json"
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
        assert config_of(block).state == 0
        save_config(cfg, **WAKE)
        wait_until(lambda: config_of(block).state == 1, timeout=15, what="awake")


def test_single_instance(out_dir, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **WAKE)
    first = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.daemon_pid == first.proc.pid, what="the daemon pid")
        second = daemons(out_dir, cfg, daemon_env)
        assert second.wait_exit() == 0
        assert first.proc.poll() is None and block.daemon_pid == first.proc.pid


def test_idle_exit_without_any_process(out_dir, daemons, daemon_env):
    daemon_env["MSPROBE_ATB_IDLE_EXIT_S"] = "0.5"
    d = daemons(out_dir, None, daemon_env)
    assert d.wait_exit() == 0
    assert "no process attached" in d.log_text


def test_exits_when_no_process_alive_with_everything_built(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=0, config=cfg)
    d = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
        for i in range(3):
            shim.tensor(0, "2_Layer", f"before/intensor{i}.bin")
        # a process's exit doorbell (native/core/lifecycle/exitdrain.c) only wakes it
        # a storm of them, as when many processes exit at once: a handler that took
        # the wake event's lock could catch the main thread holding it and hang
        storm_end = time.monotonic() + 2
        while time.monotonic() < storm_end:
            os.kill(block.daemon_pid, signal.SIGWINCH)
        csv_path = out_dir / f"atb_dump_data/data/0_{shim.pid}/0/statistic.csv"
        wait_until(lambda: csv_path.exists() and csv_path.read_text().count("\n") == 4,
                   what="the live CSV")
        assert d.proc.poll() is None
        shim.exit()
        assert d.wait_exit() == 0
        assert "no attached process is alive" in d.log_text
        assert json.loads((csv_path.parent / "ROUND_COMPLETE.json").read_text())["rows"] == 3
        assert block.daemon_pid == 0 and block.published == 0


def test_exits_when_its_dump_root_is_removed(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shims(out_dir, dev=0, config=cfg)  # alive: only the removal can end the daemon
    d = daemons(out_dir, cfg, daemon_env)
    root = out_dir / "atb_dump_data"
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    wait_until(lambda: shutil.rmtree(root, ignore_errors=True) or not root.exists(),
               what="the dump root removed")
    assert d.wait_exit() == 0
    assert "was removed or replaced" in d.errlog.read_text()
    assert not root.exists()  # nothing written into (or re-creating) the removed tree


def test_sigkill_restart_loses_nothing(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=0, config=cfg)
    dump_root = out_dir / "atb_dump_data"
    first = daemons(out_dir, cfg, daemon_env)
    csv_path = dump_root / f"data/0_{shim.pid}/0/statistic.csv"
    shim.tensor(0, "2_Layer", "before/intensor0.bin")
    wait_until(csv_path.exists, what="the first CSV")
    first.kill()
    # written while no daemon runs: only the record log has them
    shim.tensor(0, "2_Layer", "after/outtensor0.bin")
    shim.tensor(1, "2_Layer", "before/intensor0.bin")
    csv_path.write_text("corrupted by the crash\n")
    second = daemons(out_dir, cfg, daemon_env)
    wait_until(lambda: csv_path.read_text().count("\n") == 3, what="the rebuilt CSV")
    shim.tensor(1, "2_Layer", "after/outtensor0.bin")
    shim.exit()
    assert second.wait_exit() == 0
    live = derived(dump_root)
    assert live[f"data/0_{shim.pid}/1/statistic.csv"].count(b"\n") == 3
    for rel in live:
        (dump_root / rel).unlink()
    with ControlBlock(dump_root) as block:
        rebuild(dump_root, block)
    assert derived(dump_root) == live


def test_stop_waits_for_processes(out_dir, shims, daemons, daemon_env):
    daemon_env["MSPROBE_ATB_STOP_WAIT_S"] = "0.5"
    cfg = out_dir / "config.json"
    save_config(cfg, **WAKE)
    shim = shims(out_dir, dev=0, config=cfg)
    d = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.daemon_pid == d.proc.pid, what="the daemon pid")
        r = cli("daemon", "--stop", "--output", str(out_dir), env=daemon_env)
        assert r.returncode == 0 and f"until process {shim.pid} exits" in r.stderr
        assert d.proc.poll() is None and block.stop_requested
        shim.exit()
        assert d.wait_exit() == 0
    r = cli("daemon", "--stop", "--output", str(out_dir), env=daemon_env)
    assert r.returncode == 0


def test_stop_without_processes(out_dir, daemons, daemon_env):
    d = daemons(out_dir, out_dir / "config.json", daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.daemon_pid == d.proc.pid, what="the daemon pid")
    r = cli("daemon", "--stop", "--output", str(out_dir), env=daemon_env)
    assert r.returncode == 0 and "finished" in r.stderr
    assert r.stderr.rstrip().endswith("is complete"), r.stderr  # nothing selected, nothing lost
    assert d.wait_exit() == 0


def test_status_reports_processes(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=1, config=cfg)
    for name, value in (("tensors_selected", 5), ("tensors_written", 3), ("drops", 1),
                        ("queue_depth", 1), ("bytes_written", 3 << 20), ("ops_seen", 42)):
        shim.block.set_proc_counter(shim.slot, name, value)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    r = cli("status", str(out_dir / "atb_dump_data"), "--json")
    st = json.loads(r.stdout)
    p = st["processes"][0]
    assert (p["pid"], p["device"], p["alive"], p["ops_seen"]) == (shim.pid, 1, True, 42)
    assert not p["all_written"] and not st["all_written"] and st["daemon"]["alive"]
    assert st["config"]["ids"] == "2" and st["config"]["state"] == "awake"
    text = cli("status", str(out_dir)).stdout
    assert f"pid {shim.pid} device 1: alive" in text and "3/5 written (3.0 MiB)" in text
    assert "1 selected tensors not written yet" in text and "LOST: 1 dropped" in text
    shim.block.set_proc_counter(shim.slot, "queue_depth", 0)
    shim.block.set_proc_counter(shim.slot, "tensors_written", 4)
    assert json.loads(cli("status", str(out_dir), "--json").stdout)["all_written"]
    assert cli("status", str(out_dir / "nowhere")).returncode == 2


def test_daemon_path_imports_nothing_heavy():
    """The shim waits for the first publish: `-m msprobe_atb daemon` must not pull in
    numpy (or the offline tools) on its way."""
    code = ("import runpy, sys\n"
            "sys.argv = ['msprobe_atb', 'daemon', '--help']\n"
            "try:\n    runpy.run_module('msprobe_atb', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    imported = set(r.stderr.split())
    assert "msprobe_atb.daemon.cli" in imported, r.stderr
    assert "numpy" not in imported and "msprobe_atb.offline" not in imported
