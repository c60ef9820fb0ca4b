"""`stats DIR DIR`: a round is one of its model's, so one dump's prefill round 0
and another's decode round 0 are two rounds, each labelled."""

from __future__ import annotations

import polars as pl
from offline_synth import small_model

from msprobe_atb.offline.read.table import open_dump
from msprobe_atb.offline.stats.ranks import across_ranks, format_ranks, ranks_table


def test_rounds_are_labelled_and_kept_apart_by_model(tmp_path):
    dumps = []
    for host, model in (("node-a", "DecoderModel_Prefill"), ("node-b", "DecoderModel_Decode")):
        d = open_dump(small_model(tmp_path / host, inject=(1, "Linear")))
        d.tensors = d.tensors.with_columns(pl.lit(model).alias("model"))
        dumps.append((host, d))
    s = across_ranks(ranks_table(dumps))
    assert [(r["round_label"], r["first"]["host"], r["followed"]) for r in s["rounds"]] == [
        ("decode round 0", "node-b", []), ("prefill round 0", "node-a", [])]
    assert {r["host"]: r["first_nonfinite"]["round_label"] for r in s["ranks"]} == {
        "node-a": "prefill round 0", "node-b": "decode round 0"}
    text = format_ranks({**s, "losses": [], "diagnosis": []}, ["a", "b"])
    assert "\nprefill round 0: NaN/Inf first on node-a " in text
    assert "\ndecode round 0: NaN/Inf first on node-b " in text
    assert "\nround 0:" not in text
