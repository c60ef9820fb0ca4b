"""The `msprobe-atb` command. Each feature module registers its own subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules exposing `register(subparsers)`; each adds its subcommands with
# `set_defaults(func=...)`, where func(args) returns the exit code.
COMMAND_MODULES = (
    "msprobe_atb.config.cli",  # check
    "msprobe_atb.daemon.cli",  # daemon
    "msprobe_atb.status",  # status
    "msprobe_atb.tree.cli",  # rebuild
    "msprobe_atb.offline.cli",  # convert, stats, compare, overflow, report
)


# Commands whose start-up time matters (the shim waits for the daemon's first
# publish): parsed with only their own module, so nothing heavy is imported.
FAST_COMMANDS = {"daemon": "msprobe_atb.daemon.cli"}


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msprobe-atb",
        description="Runtime tensor dumps of ATB inference processes, and tools to read them.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    fast = FAST_COMMANDS.get(argv[0]) if argv else None
    parser = build_parser((fast,) if fast else COMMAND_MODULES)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
