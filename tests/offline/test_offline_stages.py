"""The two tensor sets: by default only before/intensor* and
after/outtensor*; with the opt-in all four stages, statistic_extra.csv's `Stage`
column tells the rows of a statistics-only dump apart."""

from __future__ import annotations

import numpy as np
import polars as pl
from offline_helpers import run_cli
from offline_synth import RoundWriter

from msprobe_atb.offline import compare_dumps, open_dump


def _cache_op(root, task: str, cache_after: np.ndarray, lone_after_input: bool = False):
    """One in-place op (ReshapeAndCache-like) saved at all four stages: the cache
    is input 0; before/outtensor0 is the output buffer before the op ran."""
    w = RoundWriter(root / "atb_dump_data" / "data", "0_9", 0, task, stages=True)
    before = np.zeros(4, np.float32)
    w.add("1_Layer/4_ReshapeAndCache", "input", 0, before, stage="before")
    w.add("1_Layer/4_ReshapeAndCache", "output", 0, np.full(4, 7, np.float32), stage="before")
    w.add("1_Layer/4_ReshapeAndCache", "input", 0, cache_after, stage="after")
    w.add("1_Layer/4_ReshapeAndCache", "output", 0, np.ones(4, np.float32), stage="after")
    if lone_after_input:  # only the after-stage copy of an input
        w.add("1_Layer/5_Attention", "input", 1, cache_after, stage="after")
    w.close()
    return root


def test_stage_column_tells_rows_apart(tmp_path):
    d = open_dump(_cache_op(tmp_path / "s", "statistics", np.arange(4, dtype=np.float32),
                            lone_after_input=True))
    t = d.tensors
    assert t.get_column("path").null_count() == t.height  # no Tensor Path to go by
    rc, out = run_cli("stats", str(tmp_path / "s"))
    assert "stages: all four; 3 tensors are an output buffer before its op ran" in out
    assert t.select("op_id", "stage", "io", "primary").rows() == [
        ("1_4", "before", "input", True), ("1_4", "before", "output", False),
        ("1_4", "after", "input", False), ("1_4", "after", "output", True),
        ("1_5", "after", "input", False)]


def test_compare_pairs_stage_with_stage(tmp_path):
    for task in ("statistics", "all"):
        g = _cache_op(tmp_path / task / "g", task, np.arange(4, dtype=np.float32))
        t = _cache_op(tmp_path / task / "t", task, np.arange(4, dtype=np.float32) * 2)
        res = compare_dumps(open_dump(g), open_dump(t))
        rows = res.rows.sort("target_seq")
        assert rows.get_column("stage").to_list() == ["before", "before", "after", "after"]
        # Only the in-place updated cache, after the op, differs.
        assert rows.get_column("verdict").to_list() == ["pass", "pass", "fail", "pass"], task


def test_default_set_stats(tmp_path):
    """msProbe's default set: every tensor is an input before or an output after
    its op, in a statistics-only dump too."""
    w = RoundWriter(tmp_path / "atb_dump_data" / "data", "0_9", 0, "statistics")
    w.add("1_Layer", "input", 0, np.ones(3, np.float32))
    w.add("1_Layer", "output", 0, np.array([1, np.inf, 0], np.float32))
    w.close()
    t = open_dump(tmp_path).tensors
    assert t.select("stage", "primary").rows() == [("before", True), ("after", True)]
    rc, out = run_cli("stats", str(tmp_path))
    assert "FIRST NaN/Inf in 0_9: round 0, 1_Layer output 0" in out and "stages:" not in out
    assert pl.Series(t.get_column("nonfinite")).to_list() == [False, True]


def test_all_stages_against_the_default_set(tmp_path):
    """A golden with all four stages against a default-set target: the two extra
    stages are unmatched but said to be so, and everything else is checked."""
    g = _cache_op(tmp_path / "g", "all", np.arange(4, dtype=np.float32))
    w = RoundWriter(tmp_path / "t" / "atb_dump_data" / "data", "0_9", 0)
    w.add("1_Layer/4_ReshapeAndCache", "input", 0, np.zeros(4, np.float32))
    w.add("1_Layer/4_ReshapeAndCache", "output", 0, np.ones(4, np.float32))
    w.close()
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(tmp_path / "t"),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 0, out
    assert "checked 2 of 2 golden and 2 target tensors" in out
    assert "(2 of them are at the other two stages" in out
