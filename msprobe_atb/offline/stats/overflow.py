"""`msprobe-atb overflow`: overflow events of a dump, in order, each with the
tensors of the op that overflowed.

Sources: `info/overflow/{dev}_{pid}.csv` (read/overflow_log.py), or, when there is none,
events derived from the statistics: an op whose outputs hold NaN/Inf while its
inputs do not (the origin of the values; ops that only pass them on are counted
but not listed unless `all_ops`)."""

from __future__ import annotations

import polars as pl

from ..read.overflow_log import overflow_log_events
from ..read.table import Dump, op_path
from ..read.tensor_ref import tensor_ref


def _from_stats(dump: Dump, all_ops: bool) -> list[dict]:
    df = dump.tensors.filter(pl.col("primary"))
    per_op = (df.group_by(["dev_pid", "round", "op_id"], maintain_order=True)
              .agg(pl.col("seq").min().alias("seq"), pl.col("op_name").first(),
                   (pl.col("nonfinite") & (pl.col("io") == "input")).any().alias("bad_in"),
                   (pl.col("nonfinite") & (pl.col("io") == "output")).any().alias("bad_out"))
              .filter(pl.col("bad_out")))
    if not all_ops:
        # An op whose children are in the dump overflowed through a child: keep the leaf.
        per_op = per_op.filter(~pl.col("bad_in"))
        ids = per_op.get_column("op_id").to_list()
        per_op = per_op.filter(~pl.col("op_id").map_elements(
            lambda i: any(o.startswith(i + "_") for o in ids), return_dtype=pl.Boolean))
    per_op = per_op.sort(["dev_pid", "seq"])
    events = []
    for i, r in enumerate(per_op.iter_rows(named=True)):
        rows = df.filter((pl.col("dev_pid") == r["dev_pid"]) & (pl.col("round") == r["round"])
                         & (pl.col("op_id") == r["op_id"]))
        events.append({"source": "statistics", "dev_pid": r["dev_pid"], "order": i,
                       "seq": r["seq"], "kernel": None, "op_id": r["op_id"],
                       "op": op_path(r["op_id"], r["op_name"]), "round": r["round"],
                       "origin": not r["bad_in"],
                       "tensors": [tensor_ref(t) for t in rows.iter_rows(named=True)]})
    return events


def logged_events(dump: Dump) -> list[dict]:
    """The events of the dump's overflow logs (none: an empty list)."""
    return overflow_log_events(dump) or []


def event_line(e: dict) -> str:
    """One line of an event: where, the kernel, who found it."""
    label = e["tensors"][0].get("round_label") if e["tensors"] else None
    where = (f"{label} " if label else f"round {e['round']} " if e.get("round") is not None
             else "")
    kern = f" kernel {e['kernel']}" if e.get("kernel") else ""
    found = f": {e['finding']}" if e.get("finding") else ""
    return f"#{e['order'] + 1} {e['dev_pid']} {where}{e['op']}{kern}{found}"


def overflow_events(dump: Dump, all_ops: bool = False) -> list[dict]:
    events = overflow_log_events(dump)
    return events if events is not None else _from_stats(dump, all_ops)


def format_events(events: list[dict], limit: int = 50) -> str:
    if not events:
        return "No overflow: no overflow events and no tensor holding NaN/Inf."
    src = events[0]["source"]
    lines = [f"{len(events)} overflow event(s), from the {src}, in execution order:"]
    for e in events[:limit]:
        lines.append(event_line(e))
        if not e["tensors"]:
            lines.append(f"    (no tensors of this op in the dump: dump op id {e['op_id']} with "
                         "save_child true, e.g. configs/one_layer_with_children.yaml)")
        for t in e["tensors"]:
            lines.append(f"    {t['stage']:<6} {t['io']:<6} {t['index']:<3} {t['dtype'] or '-':<8} "
                         f"{t['shape'] or '-':<12} nan {t['nan']} +inf {t['pinf']} "
                         f"-inf {t['ninf']} max {t['max']} min {t['min']}  {t['path'] or ''}")
    if len(events) > limit:
        lines.append(f"... {len(events) - limit} more (use --limit)")
    return "\n".join(lines)
