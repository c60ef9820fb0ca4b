"""`msprobe-atb run --torch`: the environment that sets the dumper up in the script's
Python, and the end of the run: waiting for every process that dumped (a child the
script forked may outlive it), building what is not built (a process that died
before building, or whose build met another's), the summary."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from msprobe_atb.config import ConfigError
from msprobe_atb.control.liveness import is_alive
from msprobe_atb.torch import summary
from msprobe_atb.torch.autostart import env_for
from msprobe_atb.torch.build import build_tree
from msprobe_atb.torch.selection import torch_config
from msprobe_atb.tree import progress
from msprobe_atb.tree.records import list_logs

POLL_S = 0.05


def prepare(cmd: list[str], output: str, config: str) -> dict[str, str] | None:
    """CMD's environment, or None when the config is refused (said why)."""
    try:
        cfg = torch_config(config)
    except ConfigError as exc:
        print(f"msprobe-atb run: error: {exc}; {cmd[0]} was not started", file=sys.stderr)
        return None
    if not cfg.dump_enable:
        print(f'msprobe-atb run: "dump_enable" is false in {config}: nothing will be dumped',
              file=sys.stderr)
    return env_for(output, config, os.environ.copy())


def finish(cmd: list[str], rc: int, output: str, config: str, since_ns: int,
           timeout: float) -> None:
    """Prints what the run dumped, once every process that dumped has exited (or
    `timeout` s have passed: then says which still run), after building what is
    not built."""
    dump_root = Path(output) / "atb_dump_data"
    still = _wait_exited(cmd, dump_root, since_ns, timeout)
    logs = summary.dumped_since(dump_root, since_ns)
    if not logs:
        print(f"msprobe-atb run: {cmd[0]} exited ({rc}) without dumping: no torch module "
              "holding parameters was called at top level, or dump_enable is false",
              file=sys.stderr)
        return
    if not still and progress.outdated(dump_root, progress.read(dump_root)):
        problem = build_tree(dump_root)
        if problem:
            print(f"msprobe-atb run: {problem}", file=sys.stderr)
    print(summary.render(dump_root, config, logs, final=not still))
    if still:
        print(f"msprobe-atb run: the dump is not complete after {timeout:g} s; {len(still)} "
              f"process(es) {cmd[0]} started still run and dump (pid "
              f"{', '.join(map(str, still))}): the counts above are not final",
              file=sys.stderr)


def _running(dump_root: Path, since_ns: int) -> list[int]:
    """The pids of the processes that began a record log since `since_ns` and run."""
    return [key.pid for key, _ in list_logs(dump_root)
            if key.start_ns >= since_ns and is_alive(key.pid, key.start_ns)]


def _wait_exited(cmd: list[str], dump_root: Path, since_ns: int, timeout: float) -> list[int]:
    """Waits until no process that dumped runs; those still running after `timeout` s.
    (A forked child's log exists before its parent's fork returns: torch/forkhook.py.)"""
    deadline = time.monotonic() + timeout
    said = False
    while alive := _running(dump_root, since_ns):
        if time.monotonic() >= deadline:
            return alive
        if not said:
            print(f"msprobe-atb run: {cmd[0]} exited; waiting for {len(alive)} process(es) it "
                  f"started that dump (pid {', '.join(map(str, alive))})", file=sys.stderr)
            said = True
        time.sleep(POLL_S)
    return []
