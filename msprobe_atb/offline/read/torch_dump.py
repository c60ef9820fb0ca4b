"""Reading a dump written by msprobe_atb.torch.Dumper (contracts §8): whether a dump
is one, and its tensors named by the torch module that took or gave them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import polars as pl

from msprobe_atb.tree.datafile import MAX_INFO, read_small

from .table import Dump


def _jsons(dump: Dump, kind: str) -> Iterator[tuple[str, dict]]:
    """(process dir name, document) of each info/{kind}/{dev}_{pid}/*.json."""
    info = dump.layout.info
    base = info / kind if info is not None else None
    if base is None or not base.is_dir():
        return
    for f in sorted(base.glob("*/*.json")):
        try:
            doc = json.loads(read_small(f, "an info JSON", MAX_INFO).decode("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            yield f.parent.name, doc


def is_torch_dump(dump: Dump) -> bool:
    """The dump was written by msprobe_atb.torch.Dumper: its info/model says
    `"framework": "torch"` (contracts §8)."""
    return any(doc.get("framework") == "torch" for _, doc in _jsons(dump, "model"))


_IDS = re.compile(r"_(\d+(?:_\d+)*)$")


def module_names(dump: Dump) -> dict[tuple[str, str], str]:
    """(dev_pid, op id) -> the qualified name of the op's module, from the call trees
    in info/layer (node `{Class}_{ids}`, `param.module`; contracts §8)."""
    out: dict[tuple[str, str], str] = {}

    def walk(dev_pid: str, node: dict, depth: int = 0) -> None:
        m = _IDS.search(str(node.get("opName", "")))
        module = (node.get("param") or {}).get("module") if isinstance(
            node.get("param"), dict) else None
        if m and isinstance(module, str):
            out.setdefault((dev_pid, m.group(1)), module)
        for kid in node.get("nodes") or []:
            if isinstance(kid, dict) and depth < 200:
                walk(dev_pid, kid, depth + 1)

    for dev_pid, doc in _jsons(dump, "layer"):
        walk(dev_pid, doc)
    return out


def torch_table(dump: Dump) -> pl.DataFrame:
    """The torch dump's primary tensors: dev_pid, call (the top module's forward
    call), module (qualified name), io, index (int), path, shape, dtype, seq."""
    names = module_names(dump)
    keys = pl.DataFrame({"dev_pid": [d for d, _ in names], "op_id": [i for _, i in names],
                         "module": list(names.values())},
                        schema={"dev_pid": pl.Utf8, "op_id": pl.Utf8, "module": pl.Utf8})
    df = dump.tensors.filter(pl.col("primary")).join(keys, on=["dev_pid", "op_id"],
                                                      how="inner")
    return df.select(
        "dev_pid", pl.col("round").alias("call"), "module", "io",
        pl.col("index").str.extract(r"^(\d+)").cast(pl.Int64).alias("index"), "path",
        "shape", "dtype", "seq").filter(pl.col("index").is_not_null())
