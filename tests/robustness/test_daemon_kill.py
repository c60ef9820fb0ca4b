"""The daemon SIGKILLed again and again while a service dumps: the shim restarts it,
nothing recorded is lost, and the tree left at the end equals `rebuild` byte for
byte, with one row per tensor record."""

from __future__ import annotations

import os
import signal
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
from testkit import save_config, wait_until

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
    rebuild(out)
    assert derived_files(root) == live, "the live tree differs from the rebuilt one"
    n = _tensor_records(root)
    assert sum(p["tensors_written"] for p in st["processes"]) == n
    # Killed daemons may leave their half-written CSV under a temporary name.
    leftovers = [p for p in temp_files(root / "data") if not p.name.startswith(".statistic")]
    assert not leftovers
    for p in temp_files(root / "data"):
        p.unlink()
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
    from msprobe_atb.config.schema import compile_config, validate
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
