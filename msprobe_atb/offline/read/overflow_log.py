"""A dump's overflow logs, `info/overflow/{dev}_{pid}.csv`: the events the control
plane wrote from the probe's `overflow` records (ATB's report `Op_ids:KernelName`,
or the probe's own scan), each with who found it (column `Finding`)."""

from __future__ import annotations

import re

import polars as pl

from msprobe_atb.tree.datafile import open_data
from msprobe_atb.tree.names import text_of_bytes

from .read_errors import read_errors
from .table import Dump
from .tensor_ref import tensor_ref

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


def overflow_log_events(dump: Dump) -> list[dict] | None:
    """The events of the dump's info/overflow CSVs in order, each with its kernel,
    who found it (`finding`) and the tensors of its kernel in the dump; None when the
    dump has no overflow log."""
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
