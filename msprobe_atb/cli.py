"""The `msprobe-atb` command. Each feature module registers its own subcommands."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from msprobe_atb import __version__

# Modules exposing `register(subparsers)`, with the subcommands each adds (with
# `set_defaults(func=...)`, where func(args) returns the exit code). A named
# command is parsed with its own module alone, so it imports only what it uses
# (the daemon's start-up, which the shim waits for, and every offline command's
# CPU); help and unknown commands build them all. tests/cli/test_cli_manners.py
# holds this table to what the modules register.
COMMAND_MODULES = {
    "msprobe_atb.config.cli": ("check",),
    "msprobe_atb.daemon.cli": ("daemon",),
    "msprobe_atb.status": ("status",),
    "msprobe_atb.wait": ("wait",),
    "msprobe_atb.run": ("run",),
    "msprobe_atb.tree.cli": ("rebuild",),
    "msprobe_atb.offline.cli": ("stats", "compare", "diagnose", "convert", "overflow", "report"),
    "msprobe_atb.offline.manifest.cli": ("index", "query"),
    "msprobe_atb.offline.replay.cli": ("replay",),
    "msprobe_atb.offline.bisect.cli": ("bisect",),
    "msprobe_atb.recorder.cli": ("trigger",),
    "msprobe_atb.offline.incidents.cli": ("incidents",),
}
MODULE_OF = {command: module for module, commands in COMMAND_MODULES.items()
             for command in commands}

# Started by the shim, not by people: parsed as usual, left out of the top-level help.
INTERNAL_COMMANDS = {"daemon"}


class _Subcommands(argparse._SubParsersAction):
    """Every subcommand's --help opens with its one-line summary, and the
    internal ones stay out of the top-level command list."""

    def add_parser(self, name, **kwargs):
        kwargs.setdefault("description", kwargs.get("help"))
        if name in INTERNAL_COMMANDS:
            kwargs.pop("help", None)  # argparse lists only the commands that have a help
        return super().add_parser(name, **kwargs)


def build_parser(modules: tuple[str, ...] = tuple(COMMAND_MODULES)) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msprobe-atb",
        description="Runtime tensor dumps of ATB inference processes, and tools to read them.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.register("action", "parsers", _Subcommands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The message for a mistyped command (argparse's own lists the internal ones)."""
    if not argv or argv[0].startswith("-"):
        return None
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if argv[0] in sub.choices:
        return None
    names = [n for n in sub.choices if n not in INTERNAL_COMMANDS]
    near = difflib.get_close_matches(argv[0], names, n=1)
    return (f"msprobe-atb: unknown command '{argv[0]}'"
            + (f"; did you mean '{near[0]}'?" if near else "")
            + f"\ncommands: {', '.join(names)} (msprobe-atb COMMAND --help for each)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    own = MODULE_OF.get(argv[0]) if argv else None
    parser = build_parser((own,) if own else tuple(COMMAND_MODULES))
    problem = unknown_command(parser, argv)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except PermissionError as exc:  # another user's dump, say: a message, not a traceback
        from msprobe_atb.access import denied
        print(f"msprobe-atb {args.command}: {denied(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `msprobe-atb stats --json | head`: the reader left; so do we, quietly.
        # stdout is pointed at /dev/null so the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
