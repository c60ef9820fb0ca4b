"""The model (prefill, decode, ...) of each row of the tensor table, so every reader can
say "decode round 59" rather than a bare round, whose number the prefill and the decode
model count apart (tree/models.py).

A top-level op's model comes from info/model/{dev_pid}/ (a node "<Name>_<id>" of a model
is the op "{id}_{Name}"); an op no topology names gets the kind its own name says
("Prefill_layer", "Decoder_layer"), else none.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from msprobe_atb.tree.graph import load_model_graphs
from msprobe_atb.tree.models import model_of_layer


def with_models(df: pl.DataFrame, info: Path | None) -> pl.DataFrame:
    """`df` with a `model` column (null where no model is known)."""
    graphs: dict[str, dict] = {}
    mapping: dict[str, str] = {}
    for dev_pid, layer in df.select("dev_pid", "layer").unique().iter_rows():
        if not layer:
            continue
        if dev_pid not in graphs:
            graphs[dev_pid] = load_model_graphs(info, dev_pid) if dev_pid else {}
        model = model_of_layer(layer, graphs[dev_pid])
        if model:
            mapping[f"{dev_pid}|{layer}"] = model
    key = pl.col("dev_pid") + "|" + pl.col("layer")
    return df.with_columns(key.replace_strict(mapping, default=None, return_dtype=pl.Utf8)
                           .alias("model"))


def model_map(df: pl.DataFrame) -> dict[tuple[str, str], str]:
    """(dev_pid, layer) -> model, for the layers whose model is known."""
    if "model" not in df.columns:
        return {}
    known = df.select("dev_pid", "layer", "model").unique().drop_nulls()
    return {(d, layer): m for d, layer, m in known.iter_rows()}
