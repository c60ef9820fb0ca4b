"""`msprobe-atb trigger DIR`: a person's trigger of the flight recorder."""

from __future__ import annotations

import argparse
import sys
import time

from msprobe_atb.argtypes import seconds_or_zero
from msprobe_atb.tree.cli import find_dump_root, output_dir_arg
from msprobe_atb.tree.incidents import DIR, file_name

MANUAL = 64


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trigger", help="fire the flight recorder by hand: every process "
                       "writes its last rounds",
                       description="Fire the flight recorder of a running service by hand, "
                       "for when the output looks wrong to a person: every process attached "
                       "to DIR writes the rounds it holds (keep_rounds before the one in "
                       "progress) and after_rounds more, and an incident report is written.")
    output_dir_arg(p)
    p.add_argument("--wait", type=seconds_or_zero, default=0.0, metavar="S",
                   help="wait up to S seconds for the incident report")
    p.set_defaults(func=run_trigger)


def run_trigger(args: argparse.Namespace) -> int:
    from msprobe_atb.control.block import ControlBlock, ControlError

    dump_root = find_dump_root(args.dir)
    try:
        block = ControlBlock(dump_root, create=False)
    except ControlError as exc:
        print(f"msprobe-atb trigger: {exc}", file=sys.stderr)
        return 1
    with block:
        _, cfg = block.read_config()
        if not cfg.rec_armed:
            print(f"msprobe-atb trigger: the flight recorder is not armed in {dump_root} "
                  "(the config in force has no \"recorder\" block, or dump_enable is false)",
                  file=sys.stderr)
            return 1
        seq = block.claim_incident(MANUAL, time.time_ns())
        if not seq:
            used = block.rec_claimed - cfg.rec_incident_base
            why = (f"max_incidents ({cfg.rec_max_incidents}) is reached"
                   if used >= cfg.rec_max_incidents else "an incident is still being written")
            print(f"msprobe-atb trigger: not fired: {why}; edit the config to re-arm",
                  file=sys.stderr)
            return 1
    report = dump_root / DIR / file_name(seq)
    print(f"incident {seq}: every process writes the round in progress and the "
          f"{cfg.rec_keep_rounds} before it (keep_rounds), then {cfg.rec_after_rounds} more "
          f"(after_rounds); report: {report}")
    deadline = time.monotonic() + args.wait
    while args.wait and not report.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return 0
