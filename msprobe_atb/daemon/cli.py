"""`msprobe-atb daemon`: the control plane of one output dir (normally started
by the shim), and `--stop`, which unload_atb_probe.sh uses."""

from __future__ import annotations

import argparse
import os
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("daemon", help="run the control plane of an output dir (the shim starts it)",
                       description="Watch the dump config, publish it to the attached processes, "
                       "and build statistic.csv and info/ from their record logs. One instance "
                       "per output dir; a second one exits at once.")
    p.add_argument("--output", default=os.environ.get("ATB_OUTPUT_DIR") or os.getcwd(),
                   help="output root (default: $ATB_OUTPUT_DIR or the current directory)")
    p.add_argument("--config", default=os.environ.get("ATB_DUMP_CONFIG") or None,
                   help="the dump config to watch (default: $ATB_DUMP_CONFIG)")
    p.add_argument("--foreground", action="store_true",
                   help="stay attached to the terminal and log to stderr as well")
    p.add_argument("--stop", action="store_true",
                   help="ask the running daemon to finish once every attached process has "
                        "exited and all records are written, and wait briefly for it")
    p.set_defaults(func=run)


def stop(output: str) -> int:
    from msprobe_atb.control.block import ControlBlock, ControlError, dump_root_of
    from msprobe_atb.control.liveness import is_daemon, pid_alive

    dump_root = dump_root_of(output)
    try:
        block = ControlBlock(dump_root, create=False)
    except ControlError:
        return 0  # nothing ever ran here
    with block:
        pid = block.daemon_pid
        if not pid or not is_daemon(pid):
            # Nothing to stop. Setting the flag anyway would keep the shims of
            # the next session from starting a daemon.
            return 0
        block.stop_requested = True
        try:
            wait_s = float(os.environ.get("MSPROBE_ATB_STOP_WAIT_S", "3"))
        except ValueError:
            wait_s = 3.0
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if block.daemon_pid != pid or not is_daemon(pid):
                print(f"msprobe-atb: control plane (pid {pid}) finished; {_ending(dump_root)}",
                      file=sys.stderr)
                return 0
            time.sleep(0.05)
        live = [s.pid for s in block.procs() if not s.exited and pid_alive(s.pid)]
        what = (f"until process{'es' if len(live) > 1 else ''} "
                f"{', '.join(map(str, live))} exit{'' if len(live) > 1 else 's'}"
                if live else "until its last records are written")
        print(f"msprobe-atb: control plane (pid {pid}) keeps running {what}; "
              f"`msprobe-atb status {dump_root}` shows progress", file=sys.stderr)
    return 0


def _ending(dump_root) -> str:
    """How the dump ended, as `wait` says it: complete only if nothing was lost and
    every derived file is written (a full disk is no complete dump)."""
    from msprobe_atb.wait import check, outcome

    state = check(dump_root)
    if state.done and not state.lost and not state.unwritten and not state.params_lost:
        return f"the dump in {dump_root} is complete"
    return f"the dump in {dump_root} is NOT complete: {outcome(state)}"


def run(args: argparse.Namespace) -> int:
    if args.stop:
        return stop(args.output)
    from msprobe_atb.daemon.service import run_daemon

    return run_daemon(args.output, args.config, args.foreground)
