"""`msprobe-atb overflow`: overflow events of a dump, in order, each with the
tensors of the op that overflowed.

Sources: `info/overflow/{dev}_{pid}.csv` written by the control plane from the
probe's `overflow` records (kernel `Op_ids:KernelName`, and who found it: ATB's
report or the probe's own scan), or, when there is none,
events derived from the statistics: an op whose outputs hold NaN/Inf while its
inputs do not (the origin of the values; ops that only pass them on are counted
but not listed unless `all_ops`)."""

from __future__ import annotations

import re

import polars as pl

from msprobe_atb.tree.datafile import open_data
from msprobe_atb.tree.names import text_of_bytes

from ..diagnose.anomalies import tensor_ref
from ..read.read_errors import read_errors
from ..read.table import Dump, op_path

_IDS = re.compile(r"_(\d+(?:_\d+)*)$")


def _op_tensors(df: pl.DataFrame, dev_pid: str, op_id: str, kernel: str,
                seq: int | None) -> list[dict]:
    """The tensors of the kernel `kernel` run by op `op_id` (or of the op itself)."""
    mine = pl.col("dev_pid") == dev_pid
    rows = df.filter(mine & pl.col("op_id").str.starts_with(op_id + "_")
                     & (pl.col("op_type") == kernel))
    if rows.height == 0:
        rows = df.filter(mine & (pl.col("op_id") == op_id))
    if rows.height == 0:
        return []
    # An op id runs once per round (prefill and decode are different top-level ops):
    # the round of the event is the latest one at or before its sequence number.
    before = rows.filter(pl.col("seq") <= seq) if seq is not None else rows.head(0)
    rnd = (before if before.height else rows).get_column("round")[-1 if before.height else 0]
    rows = rows.filter((pl.col("round") == rnd)
                       & (pl.col("op_id") == rows.get_column("op_id")[0]))
    # Inputs before and outputs after the op; the other side's copy only if that
    # is all the dump has (an overflow_check dump keeps the `after` side).
    rows = rows.filter(pl.col("primary") | ~pl.col("primary").any().over(["io", "index"]))
    return [tensor_ref(r) for r in rows.iter_rows(named=True)]


def _from_logs(dump: Dump) -> list[dict] | None:
    info = dump.layout.info
    if info is None or not (info / "overflow").is_dir():
        return None
    files = sorted((info / "overflow").glob("*.csv"))
    if not files:
        return None
    df = dump.tensors
    scope = set(df.get_column("dev_pid").unique().to_list())
    events = []
    for f in files:
        dev_pid = f.stem
        if dump.layout.dev_pids is not None and dev_pid not in dump.layout.dev_pids:
            continue  # the file is named after its process
        try:
            with open_data(f) as fh:
                raw = fh.read()
            ev = pl.read_csv(text_of_bytes(raw).encode(), infer_schema=False)
        except read_errors() as e:
            dump.problems.append(f"{f}: unreadable overflow log ({str(e).splitlines()[0]})")
            continue
        cols = {c.lower(): c for c in ev.columns}
        # ATB's report is `<OpName>_<ids>:<KernelName>`; the control plane also
        # splits it into "Op Id" and "Kernel Name" columns, which name the
        # kernel of the probe's own finds too (no report of ATB's).
        split = "op id" in cols and "kernel name" in cols
        rcol = None if split else cols.get("report") or cols.get("kernel")
        scol = cols.get("sequence") or cols.get("seq")
        fcol = cols.get("finding")
        if rcol is None and not split:
            dump.problems.append(f"{f}: no Report or Op Id/Kernel Name columns in {ev.columns}")
            continue
        for i, r in enumerate(ev.iter_rows(named=True)):
            kernel = r[rcol] if rcol else f"{r[cols['op id']]}:{r[cols['kernel name']]}"
            opname, _, kname = (kernel or "").rpartition(":")
            m = _IDS.search(opname)
            op_id = m.group(1) if m else ""
            seq = int(r[scol]) if scol and str(r[scol]).lstrip("-").isdigit() else None
            proc = r.get(cols.get("device and pid", ""), None) or dev_pid
            tensors = _op_tensors(df, proc, op_id, kname, seq) if proc in scope else []
            events.append({"source": "overflow log", "dev_pid": proc, "order": i,
                           "seq": seq, "kernel": kernel, "kernel_name": kname,
                           "op_id": op_id, "finding": (r[fcol] or None) if fcol else None,
                           "op": tensors[0]["op"] if tensors else opname,
                           "round": tensors[0]["round"] if tensors else None,
                           "tensors": tensors})
    return events


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
    return _from_logs(dump) or []


def event_line(e: dict) -> str:
    """One line of an event: where, the kernel, who found it."""
    label = e["tensors"][0].get("round_label") if e["tensors"] else None
    where = (f"{label} " if label else f"round {e['round']} " if e.get("round") is not None
             else "")
    kern = f" kernel {e['kernel']}" if e.get("kernel") else ""
    found = f": {e['finding']}" if e.get("finding") else ""
    return f"#{e['order'] + 1} {e['dev_pid']} {where}{e['op']}{kern}{found}"


def overflow_events(dump: Dump, all_ops: bool = False) -> list[dict]:
    events = _from_logs(dump)
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
