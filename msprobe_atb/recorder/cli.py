"""`msprobe-atb trigger DIR` (a person's trigger) and `msprobe-atb incidents DIR`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from msprobe_atb.argtypes import seconds_or_zero
from msprobe_atb.tree.cli import find_dump_root, output_dir_arg
from msprobe_atb.tree.incidents import DIR, file_name, format_incident, read_incidents

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
    q = sub.add_parser("incidents", help="list the flight recorder's incidents",
                       description="List the incident reports of a dump "
                       "(<dump root>/incidents/*.json): what fired, where, and which rounds "
                       "were written.")
    output_dir_arg(q)
    q.add_argument("--json", action="store_true", help="machine-readable output (a list)")
    q.set_defaults(func=run_incidents)


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


def run_incidents(args: argparse.Namespace) -> int:
    dump_root = find_dump_root(args.dir)
    if not dump_root.is_dir():
        print(f"msprobe-atb incidents: {dump_root} does not exist", file=sys.stderr)
        return 1
    docs = read_incidents(Path(dump_root))
    if docs:
        _add_replay(Path(dump_root), docs)
    from msprobe_atb.offline.replay.text import brief_line
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    if not docs:
        print(f"no incidents in {dump_root}")
        return 0
    print("\n\n".join(format_incident(d)
                       + (f"\n  {brief_line(d['replay'])}" if d.get("replay") else "")
                       + (f"\n  {d['diagnosis']['line']}" if d.get("diagnosis") else "")
                       for d in docs))
    return 0


def _add_replay(dump_root: Path, docs: list[dict]) -> None:
    """Each incident's first offending op, replayed from the rounds it flushed
    (the op, its inputs, or the dtype: msprobe-atb replay), and the root cause in
    its process's rounds (msprobe-atb diagnose)."""
    import polars as pl

    from msprobe_atb.offline.diagnose.engine import diagnose
    from msprobe_atb.offline.diagnose.text import diagnosis_json
    from msprobe_atb.offline.read.layout import DumpNotFound
    from msprobe_atb.offline.read.table import open_dump
    from msprobe_atb.offline.replay.text import replay_brief
    try:
        dump = open_dump(dump_root, fill_stats=True)
    except (DumpNotFound, ValueError, OSError):
        return
    for d in docs:
        ft = d.get("first_tensor") or {}
        if "error" in d:
            continue
        dev_pid = f"{d.get('device')}_{d.get('pid')}"
        mine = dump.tensors.filter(pl.col("dev_pid") == dev_pid)
        d["diagnosis"] = diagnosis_json(diagnose(dump, mine if mine.height else None))
        if ft.get("op_id") and d.get("round") is not None:
            d["replay"] = replay_brief(dump, dev_pid, d["round"], ft["op_id"])
