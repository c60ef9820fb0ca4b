"""The daemon SIGKILLed again and again while a service dumps: the shim restarts it,
nothing recorded is lost, and the tree left at the end equals `rebuild` byte for
byte, with one row per tensor record."""

from __future__ import annotations

import os
import signal
import subprocess
import threading

from robust_helpers import (
    DUMP_ALL,
    SMALL,
    assert_readable_tree,
    cli,
    derived_files,
    rebuild,
    records,
    run_atbsim,
    status,
    status_now,
    temp_files,
    wait_daemon_gone,
)
from testkit import manifest_rows, save_config, wait_until

from msprobe_atb.control.liveness import pid_alive

KILLS = 3


def _tensor_records(root) -> int:
    return sum(r["k"] == "tensor" for r in records(root))


def test_daemon_killed_in_a_loop(tmp_path, services):
    out = tmp_path / "out dir"  # a space in the output path, too
    out.mkdir()
    root = out / "atb_dump_data"
    # One layer, and a small queue budget (policy block): the service slows down to
    # the writers' pace, so its exit drain is short and it stops cleanly at the end.
    save_config(out / "config.json", **{**DUMP_ALL, "task": "all", "ids": "1",
                                        "queue_budget_mb": 4})
    svc = services(out)
    stop = threading.Event()
    errors: list[BaseException] = []

    def load() -> None:
        # Paced, so that a restarting daemon gets some CPU on a busy machine (a slow
        # start makes the shim back off, 1 s doubling up to 30 s, before trying again).
        while not stop.wait(0.3):
            try:
                svc.request(max_tokens=2)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                return

    t = threading.Thread(target=load, daemon=True)
    t.start()
    try:
        killed: set[int] = set()
        for _ in range(KILLS):
            pid = wait_until(lambda: (st := status_now(out))["daemon"]["alive"]
                             and st["daemon"]["pid"] not in killed and st["daemon"]["pid"],
                             timeout=30, step=0.05, what="a (restarted) daemon")
            before = _tensor_records(root)
            wait_until(lambda b=before: _tensor_records(root) > b or errors, timeout=30,
                       what="more records while this daemon runs")
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
            wait_until(lambda p=pid: not pid_alive(p), what="the daemon to die")
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors, f"a request failed while the daemon was killed: {errors[0]!r}"
    assert svc.proc.poll() is None, "the service died"
    wait_until(lambda: status_now(out)["daemon"]["alive"], timeout=30, what="a last daemon")
    r = cli("rebuild", str(out))  # two writers of one tree: refused while a daemon runs
    assert r.returncode == 1 and "daemon is running" in r.stderr
    assert svc.stop() == 0
    wait_daemon_gone(out)

    st = status(out)
    assert st["all_written"] and all(p["exited"] for p in st["processes"]), st
    live = derived_files(root)
    live_manifest = manifest_rows(root)
    rebuild(out)
    assert derived_files(root) == live, "the live tree differs from the rebuilt one"
    n = _tensor_records(root)
    # each restarted daemon re-derived the manifest from the logs: no row lost or doubled
    assert manifest_rows(root).equals(live_manifest) and live_manifest.height == n
    assert sum(p["tensors_written"] for p in st["processes"]) == n
    # what a killed daemon left half-written, the next one removed when it started
    assert not temp_files(root)
    assert assert_readable_tree(root) == n


def test_frozen_daemon_does_not_stall_the_service(tmp_path, services):
    """SIGSTOP (a daemon swapped out, or stopped in a debugger): the hooks never wait
    for the control plane once attached, so requests keep being answered and dumped."""
    out = tmp_path / "out"
    out.mkdir()
    save_config(out / "config.json", **{**DUMP_ALL, "task": "statistics", "ids": "1"})
    svc = services(out)
    svc.request(max_tokens=2)
    pid = status_now(out)["daemon"]["pid"]
    root = out / "atb_dump_data"
    os.kill(pid, signal.SIGSTOP)
    try:
        before = _tensor_records(root)
        for _ in range(3):
            svc.request(max_tokens=2)
        wait_until(lambda: _tensor_records(root) > before, what="records while frozen")
        assert status_now(out)["daemon"]["pid"] == pid  # not replaced behind its back
    finally:
        os.kill(pid, signal.SIGCONT)
    assert svc.stop() == 0
    wait_daemon_gone(out)
    st = status_now(out)
    assert st["all_written"]
    assert sum(p["tensors_written"] for p in st["processes"]) == _tensor_records(root)


def test_no_op_lost_after_a_daemon_died_without_cleaning_up(tmp_path):
    from msprobe_atb.config.compile import compile_config
    from msprobe_atb.config.schema import validate
    from msprobe_atb.control.block import ControlBlock

    out = tmp_path / "out"
    root = out / "atb_dump_data"
    root.mkdir(parents=True)
    # What a daemon SIGKILLed while it published "asleep" leaves behind.
    with ControlBlock(root, create=True) as block:
        block.publish(compile_config(validate({"dump_enable": False})))
    config = tmp_path / "config.json"
    save_config(config, **{**DUMP_ALL, "task": "statistics"})  # edited meanwhile
    r = run_atbsim(out, config, *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    log = root / ".probe" / "daemon.log"  # the daemon it started may come up late
    wait_until(lambda: log.exists() and "exiting" in log.read_text(), what="the daemon's exit")
    rounds = {x["path"].split("/")[1] for x in records(root) if x["k"] == "tensor"}
    assert "0" in rounds, f"round 0 was not dumped (rounds dumped: {sorted(rounds)})"


def test_a_daemon_started_after_a_killed_one_removes_its_temporaries(tmp_path):
    """A daemon killed while it wrote a derived file leaves it under a temporary name
    (.NAME.PID.tmp); the next daemon removes those of dead writers when it starts,
    and keeps a live writer's."""
    from msprobe_atb.control.block import ControlBlock

    out = tmp_path / "out"
    root = out / "atb_dump_data"
    root.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with ControlBlock(root, create=True) as block:
        block.daemon_pid = dead.pid  # killed: a daemon that exits clears it
    left = root / "info" / "layer" / "0_1" / f".LmHead_7.json.{dead.pid}.tmp"
    live = root / "info" / "layer" / "0_1" / f".LmHead_7.json.{os.getpid()}.tmp"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"")
    live.write_bytes(b"")
    config = tmp_path / "config.json"
    save_config(config, **{**DUMP_ALL, "task": "statistics"})
    r = run_atbsim(out, config, *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not left.exists() and live.exists()


def test_restarted_daemon_keeps_the_last_good_config(tmp_path, services):
    """Good config, a request, a bad edit (refused, dumping goes
    on), kill -9 of the daemon: the daemon the shim starts again finds the bad file
    and keeps the last good config in force, so the next request dumps as before."""
    out = tmp_path / "out"
    out.mkdir()
    cfg = out / "config.json"
    good = {**DUMP_ALL, "task": "statistics", "ids": "1", "save_child": False}
    save_config(cfg, **good)
    svc = services(out)

    def selected() -> int:
        return sum(p["tensors_selected"] for p in status_now(out)["processes"])

    def dumped_by_a_request() -> int:
        before = selected()
        svc.request(max_tokens=2)
        wait_until(lambda: status_now(out)["all_written"], what="the request's tensors written")
        return selected() - before

    per_request = dumped_by_a_request()
    assert per_request > 0
    save_config(cfg, **{**good, "filter_level": 7})
    wait_until(lambda: "filter_level" in status_now(out)["rejected_edit"], what="the refusal")
    assert dumped_by_a_request() == per_request
    st = status_now(out)
    pid, generation = st["daemon"]["pid"], st["generation"]
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: (s := status_now(out))["daemon"]["alive"] and s["daemon"]["pid"] != pid
               and s["generation"] > generation, timeout=60, what="a restarted daemon's publish")
    st = status_now(out)
    assert st["config"]["state"] == "awake" and st["config"]["ids"] == "1", st["config"]
    assert "filter_level" in st["rejected_edit"]
    assert dumped_by_a_request() == per_request
    log = (out / "atb_dump_data" / ".probe" / "daemon.log").read_text()
    assert "keeping the last good config, kept by the previous control plane" in log
    # Deleting the config still means asleep, also for the next daemon.
    cfg.unlink()
    wait_until(lambda: status_now(out)["config"]["state"] == "asleep", what="asleep")
    assert not (out / "atb_dump_data" / ".probe" / "last_good_config.json").exists()
