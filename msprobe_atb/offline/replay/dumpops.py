"""The ops of a dump as replay sees them: each with its param, its inputs as they
were before it ran and its outputs after, in execution order.

An op folder with an `op_param.json` is a leaf op (ATB writes the param of every
op it runs through SaveParam); a folder below a leaf op is one of its kernels and is
not an op of its own; any other op folder is a graph (a layer), replayed through
its children. In a torch dump (contracts §8) every op is a module: no
op_param.json, and each op knows its module's qualified name.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from msprobe_atb.tree.datafile import read_bounded

from ..read.confine import REFUSED
from ..read.table import Dump
from ..read.torch_dump import is_torch_dump, module_names

_INDEX = re.compile(r"^(\d+)")
MAX_PARAM_BYTES = 1 << 20  # ATB's largest params are a few KiB


@dataclass
class DumpedTensor:
    index: int
    name: str  # the file's index column, e.g. "0_x"
    dtype: str
    path: str | None  # None: listed (statistics) but no file, or refused
    refused: str | None = None  # why its file was refused (read/confine.py), e.g. a link out


@dataclass
class DumpedOp:
    dev_pid: str
    round: int
    op_id: str
    op_type: str
    rel: str  # the op folder below the round dir, e.g. "1_Prefill_layer/11_ActivationOperation"
    folder: Path | None
    seq: int
    inputs: list[DumpedTensor] = field(default_factory=list)
    outputs: list[DumpedTensor] = field(default_factory=list)
    children: list[str] = field(default_factory=list)  # op ids of leaf ops below a graph
    module: str | None = None  # torch dump: the module's qualified name ("" if not in info/)

    @property
    def path(self) -> str:
        return f"{self.dev_pid}/{self.round}/{self.rel}"

    @property
    def is_leaf(self) -> bool:
        # lexists: an op_param.json that is not a regular file is refused by param(), by name
        return self.folder is not None and os.path.lexists(self.folder / "op_param.json")

    def param(self) -> dict:
        """The op's param JSON; raises ValueError naming the file when it cannot be read."""
        f = self.folder / "op_param.json" if self.folder else None
        if f is None or not os.path.lexists(f):
            raise ValueError("no op_param.json was dumped for it")
        try:
            text = read_bounded(f, MAX_PARAM_BYTES, "an op_param.json").decode("utf-8", "replace")
            obj = json.loads(text or "{}")
        except OSError as e:
            raise ValueError(f"{f}: cannot be read: {e.strerror}") from None
        except RecursionError:
            raise ValueError(f"{f}: nested too deep to be an op's param") from None
        except ValueError as e:  # not JSON, or TooLarge
            raise ValueError(f"{f}: not JSON ({e})" if isinstance(e, json.JSONDecodeError)
                             else str(e)) from None
        if not isinstance(obj, dict):
            raise ValueError(f"{f}: not a JSON object")
        return obj


def _folder_name(op_id: str, op_name: str) -> str:
    """The op's folder below its round dir: `1_11` + `Prefill_layer/ActivationOperation`
    -> `1_Prefill_layer/11_ActivationOperation`."""
    ids, names = op_id.split("_"), op_name.split("/")
    if len(ids) != len(names):
        return op_id
    return "/".join(f"{i}_{n}" for i, n in zip(ids, names))


def _tensors(rows: pl.DataFrame, io: str, stage: str) -> list[DumpedTensor]:
    sel = rows.filter(pl.col("io") == io)
    staged = sel.filter(pl.col("stage") == stage)
    sel = staged if staged.height else sel.filter(pl.col("stage").is_null())
    out: dict[int, DumpedTensor] = {}
    for r in sel.iter_rows(named=True):
        m = _INDEX.match(str(r["index"] or ""))
        if m and int(m.group(1)) not in out:
            out[int(m.group(1))] = DumpedTensor(
                int(m.group(1)), str(r["index"]), str(r["dtype"] or ""), r["path"],
                r["note"] if r.get("status") == REFUSED else None)
    return [out[i] for i in sorted(out)]


def dumped_ops(dump: Dump, df: pl.DataFrame | None = None) -> list[DumpedOp]:
    """Every op of the (filtered) table, leaf ops and graphs, in execution order;
    kernels are left out."""
    df = dump.tensors if df is None else df
    ops: list[DumpedOp] = []
    key_cols = ["dev_pid", "round", "op_id"]
    order = df.with_row_index("_pos").group_by(key_cols, maintain_order=True).agg(
        pl.col("_pos").min().alias("_first"))
    first = {(r["dev_pid"], r["round"], r["op_id"]): r["_first"]
             for r in order.iter_rows(named=True)}
    for (dev_pid, rnd, op_id), rows in df.group_by(key_cols, maintain_order=True):
        rel = _folder_name(str(op_id), str(rows.get_column("op_name")[0] or ""))
        rd = rows.get_column("round_dir")[0]
        ops.append(DumpedOp(dev_pid, int(rnd), str(op_id), str(rows.get_column("op_type")[0]),
                            rel, Path(rd) / rel if rd else None, first[(dev_pid, rnd, op_id)],
                            _tensors(rows, "input", "before"), _tensors(rows, "output", "after")))
    ops.sort(key=lambda o: (o.dev_pid, o.seq))
    if is_torch_dump(dump):
        names = module_names(dump)
        for o in ops:
            o.module = names.get((o.dev_pid, o.op_id), "")
    leaves = {(o.dev_pid, o.round, o.op_id) for o in ops if o.is_leaf}
    ops = [o for o in ops if o.is_leaf or "_" not in o.op_id
           or (o.dev_pid, o.round, o.op_id.rsplit("_", 1)[0]) not in leaves]
    for o in ops:
        if not o.is_leaf:
            o.children = [c.op_id for c in ops if c.is_leaf and c.dev_pid == o.dev_pid
                          and c.round == o.round and c.op_id.startswith(o.op_id + "_")]
    return ops
