"""`msprobe-atb run --torch`: the environment that sets the dumper up in the script's
Python, and the end of the run (the summary; the derived files of a process that
died before writing them)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from msprobe_atb.config import ConfigError
from msprobe_atb.torch import summary
from msprobe_atb.torch.autostart import env_for
from msprobe_atb.torch.build import build_tree
from msprobe_atb.torch.selection import torch_config


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


def finish(cmd: list[str], rc: int, output: str, config: str, since_ns: int) -> None:
    """Prints what the run dumped, after building what a killed process left unbuilt."""
    dump_root = Path(output) / "atb_dump_data"
    logs = summary.dumped_since(dump_root, since_ns)
    if not logs:
        print(f"msprobe-atb run: {cmd[0]} exited ({rc}) without dumping: no torch module "
              "holding parameters was called at top level, or dump_enable is false",
              file=sys.stderr)
        return
    if summary.unfinished(logs):
        problem = build_tree(dump_root)
        if problem:
            print(f"msprobe-atb run: {problem}", file=sys.stderr)
    print(summary.render(dump_root, config, logs))
