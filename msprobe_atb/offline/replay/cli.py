"""`msprobe-atb replay`: recompute ops from a dump in float64 and judge their outputs.

Imports stay inside the command so that registering it costs nothing at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..read.cores import default_jobs
from ..read.formulas import FORMULAS

EXIT_OK, EXIT_AT_FAULT, EXIT_ERROR = 0, 1, 2


def _lost_lines(dump) -> list[str]:
    """What the dump's roots lost or their derived files lack, as `stats` says it."""
    from ..read.losses import format_losses, losses_summary

    lines = []
    for layout in dump.layouts():
        s = losses_summary(layout)
        if s["lost"] or s["params_lost"] or s["derived_behind"]:
            lines += format_losses(s, dump.tensors.height)
    return lines


def cmd_replay(a) -> int:
    from ..read.emit import emit
    from ..read.jsonsafe import jsonable
    from ..read.layout import DumpNotFound
    from ..read.table import filter_tensors, open_dump
    from .allocator import return_freed_arrays
    from .runner import Replayer, first_at_fault, replayable, select
    from .text import format_text

    if a.jobs < 1:
        print(f"msprobe-atb replay: error: -j {a.jobs}: at least 1 worker", file=sys.stderr)
        return EXIT_ERROR
    if not a.op and not a.all:
        print("msprobe-atb replay: error: name the ops with --op ID|PATH, or replay every op "
              "with --all", file=sys.stderr)
        return EXIT_ERROR
    try:
        dump = open_dump(a.dir)
        if a.round is not None:
            dump.tensors = filter_tensors(dump.tensors, round=a.round)
        rep = Replayer(dump)
        gold = None
        if a.golden:
            gdump = open_dump(a.golden)
            if a.round is not None:
                gdump.tensors = filter_tensors(gdump.tensors, round=a.round)
            gold = Replayer(gdump)
    except (DumpNotFound, ValueError) as e:
        print(f"msprobe-atb replay: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    ops = replayable(select(rep.ops, a.op) if a.op else rep.ops)
    if not ops:
        what = f"no op matches {', '.join(a.op)}" if a.op else "the dump holds no op"
        print(f"msprobe-atb replay: error: {what} (in {a.dir})", file=sys.stderr)
        return EXIT_ERROR
    return_freed_arrays()
    from ..read.progress import progress_bar
    from .workers import WorkerDied, replay_ops
    try:
        with progress_bar("replay", "op", len(ops)) as bar:
            results = replay_ops(rep, ops, a.jobs, a.dir, a.round, bar.update)
    except WorkerDied as e:
        print(f"msprobe-atb replay: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    first = first_at_fault(results)
    lost = _lost_lines(dump)
    golden_of = {}
    if gold is not None:
        gops = {(o.round, o.op_id): o for o in gold.ops}
        for r in results:
            if r.verdict != "ok":
                g = gops.get((r.op.round, r.op.op_id))
                golden_of[r.op.path] = gold.replay(g) if g is not None else None
    doc = {"ops": [r.as_json() for r in results],
           "first": first.as_json() if first else None, "dump_incomplete": lost}
    if gold is not None:
        doc["golden"] = {p: (g.as_json() if g else None) for p, g in golden_of.items()}
    text = json.dumps(jsonable(doc), indent=1) if a.json else \
        format_text(results, first, golden_of if gold is not None else None,
                    show_ok=bool(a.op) or a.verbose, lost=lost)
    try:
        emit(text, a.output, f"replay: {len(results)} op(s) judged")
    except ValueError as e:
        print(f"msprobe-atb replay: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_AT_FAULT if first else EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("replay", help="recompute ops from a dump in float64: is it the op, its "
                                      "inputs, or the dtype (exit 1 if an op is at fault)",
                       epilog=FORMULAS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="the dump (output root, atb_dump_data, data/, "
                                              "{dev}_{pid} or round dir)")
    p.add_argument("--round", help="rounds, e.g. 0 or 0,2-4 (default: all)")
    p.add_argument("--op", action="append", metavar="ID|PATH",
                   help="an op id (1_11) or folder path (1_Prefill_layer/11_ActivationOperation);"
                        " a graph brings its child ops; repeatable")
    p.add_argument("--all", action="store_true",
                   help="every op, in execution order, and the first one at fault")
    p.add_argument("--golden", metavar="DIR",
                   help="also replay the same ops in this golden dump and say how they fare")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="with --all, list the ops that replay ok too (they are counted anyway)")
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(), metavar="N",
                   help="worker processes for the ops (default: one per core, %(default)s "
                        "here); a small replay runs in this process")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE")
    p.set_defaults(func=cmd_replay)
