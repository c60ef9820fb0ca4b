"""`msprobe-atb incidents DIR`: the flight recorder's incident reports, each with
the replay of its first offending op and its process's diagnosis."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from msprobe_atb.tree.cli import find_dump_root, output_dir_arg
from msprobe_atb.tree.incidents import format_incident, read_incidents


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("incidents", help="list the flight recorder's incidents",
                       description="List the incident reports of a dump "
                       "(<dump root>/incidents/*.json): what fired, where, and which rounds "
                       "were written.")
    output_dir_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (a list)")
    p.set_defaults(func=run_incidents)


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
    its process's rounds (msprobe-atb diagnose). One diagnosis per process, which
    also gives the verdicts on its incidents' ops: no op is replayed twice."""
    import polars as pl

    from msprobe_atb.offline.diagnose.engine import diagnose
    from msprobe_atb.offline.diagnose.text import diagnosis_json
    from msprobe_atb.offline.read.layout import DumpNotFound
    from msprobe_atb.offline.read.table import open_dump
    from msprobe_atb.offline.replay.text import brief
    try:
        dump = open_dump(dump_root, fill_stats=True)
    except (DumpNotFound, ValueError, OSError):
        return
    by_process: dict[str, list[dict]] = {}
    for d in docs:
        if "error" not in d:
            by_process.setdefault(f"{d.get('device')}_{d.get('pid')}", []).append(d)
    for dev_pid, mine_docs in by_process.items():
        ops = {id(d): (dev_pid, d["round"], ft["op_id"]) for d in mine_docs
               if (ft := d.get("first_tensor") or {}).get("op_id") and d.get("round") is not None}
        mine = dump.tensors.filter(pl.col("dev_pid") == dev_pid)
        diagnosis = diagnose(dump, mine if mine.height else None, judge=ops.values())
        said = diagnosis_json(diagnosis)
        for d in mine_docs:
            d["diagnosis"] = said
            if id(d) in ops:
                d["replay"] = brief(diagnosis.verdicts.get(ops[id(d)]))
