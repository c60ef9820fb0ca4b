"""The Parquet manifest the tree builder writes: live == rebuild row for row, its
columns and partitions, DuckDB and polars reading it, and a bounded file count."""

from __future__ import annotations

import math
import shutil

import duckdb
import polars as pl
import pytest
from test_builder import scenario_steps
from testkit import manifest_rows

from msprobe_atb.tree.builder import TreeBuilder
from msprobe_atb.tree.drain import BlockOracle, RecordDrain, rebuild
from msprobe_atb.tree.manifest import COLUMN_NAMES, FANIN


@pytest.fixture
def two_nodes_env(monkeypatch):
    monkeypatch.setenv("MSPROBE_ATB_HOST", "node-a")


def live_build(dump_root, a, steps) -> None:
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)
    for step in steps:
        step()
        drain.poll()
        oracle.refresh()
        live.flush()
    live.finish()  # the daemon's last flush: every row in a manifest file


def test_live_manifest_equals_rebuild_row_for_row(out_dir, shims, two_nodes_env):
    a = shims(out_dir, dev=0)
    b = shims(out_dir, dev=1)
    dump_root = out_dir / "atb_dump_data"
    live_build(dump_root, a, scenario_steps(a, b))
    live = manifest_rows(dump_root)
    shutil.rmtree(dump_root / "manifest")
    rebuild(dump_root, a.block)
    assert manifest_rows(dump_root).equals(live)

    assert set(live.columns) == {*COLUMN_NAMES, "host", "device", "pid"}
    assert live.get_column("host").unique().to_list() == ["node-a"]
    ra = live.filter(pl.col("pid") == a.pid)
    # round 0 in execution order; the partial record landed at step 2
    r0 = ra.filter(pl.col("round") == 0)
    assert r0.get_column("round_seq").to_list() == [0, 1, 2, 3]
    assert r0.select(pl.col("io") + pl.col("index")).to_series().to_list() == [
        "input0", "input0_x", "output0", "output1"]
    first = r0.row(0, named=True)
    assert first["stage"] == "before" and first["io"] == "input" and first["index"] == "0"
    assert first["op_id"] == "2" and first["op_name"] == "Layer" and first["op_type"] == "Layer"
    assert first["dtype"] == "float16" and first["format"] == "nd" and first["shape"] == "2x2"
    assert first["max"] == 1.0 and first["min"] == float("-inf") and first["nan"] == 1
    assert first["path"] == f"data/0_{a.pid}/0/2_Layer/before/intensor0.bin"
    assert first["status"] == "written" and first["bytes"] == 8
    # complex64: the modulus of statistic.csv's (re,im) pairs
    z = r0.row(2, named=True)
    assert z["dtype"] == "complex64" and z["norm"] == 2.5
    assert (z["max"], z["min"], z["mean"]) == (math.hypot(1, 2), 0.5, math.hypot(0.5, 1))
    # writer threads finished seq 7 before seq 6: the round is still in sequence order
    r1 = ra.filter(pl.col("round") == 1)
    assert r1.get_column("seq").to_list() == [6, 7]
    assert r1.get_column("status").to_list() == ["lost", "written"]
    assert r1.get_column("note").to_list() == ["disk full", None]
    # statistics-only: no file, no path
    rb = live.filter(pl.col("pid") == b.pid).row(0, named=True)
    assert rb["status"] == "none" and rb["path"] is None and rb["device"] == 1
    # the statistic.csv the daemon writes is untouched by the manifest
    assert (dump_root / "data" / f"0_{a.pid}" / "0" / "statistic.csv").read_text().count(
        "\n") == 5

    # one dataset for DuckDB and for polars, partition columns included
    glob = str(dump_root / "manifest" / "**" / "*.parquet")
    con = duckdb.connect()
    rows = con.execute(
        "SELECT host, device, pid, round, round_seq, op_id, io FROM read_parquet(?, "
        "hive_partitioning = true) WHERE nan > 0 OR pinf > 0 OR ninf > 0 "
        "ORDER BY device, round, round_seq", [glob]).fetchall()
    assert rows == [("node-a", 0, a.pid, 0, 0, "2", "input"),
                    ("node-a", 1, b.pid, 0, 0, "2", "input")]
    lazy = pl.scan_parquet(glob, hive_partitioning=True)
    per_dev = (lazy.group_by("device").agg(pl.len().alias("n")).sort("device").collect())
    assert per_dev.rows() == [(0, 6), (1, 1)]


def test_restarted_daemon_rederives_its_rows_and_keeps_the_rest(out_dir, shims,
                                                                 two_nodes_env):
    """A daemon restarted mid-run reads every record log again: its manifest is a
    rebuild's, row for row, holding all the first daemon wrote. A process whose
    record log is gone keeps the rows the manifest has of it (as its CSVs stay)."""
    a = shims(out_dir, dev=0)
    b = shims(out_dir, dev=1)
    dump_root = out_dir / "atb_dump_data"
    steps = scenario_steps(a, b)
    live_build(dump_root, a, steps[:2])
    first = manifest_rows(dump_root)
    live_build(dump_root, a, steps[2:])  # the restarted daemon
    second = manifest_rows(dump_root)
    assert 0 < first.height <= second.height
    assert first.join(second, on=first.columns, how="anti", nulls_equal=True).height == 0
    shutil.rmtree(dump_root / "manifest")
    rebuild(dump_root, a.block)
    assert manifest_rows(dump_root).equals(second)

    b.log.unlink()
    live_build(dump_root, a, [lambda: None])  # restarted again, without B's log
    assert manifest_rows(dump_root).equals(second)
    assert second.filter(pl.col("pid") == b.pid).height == 1


def test_file_count_stays_bounded_over_many_rounds(out_dir, shims, two_nodes_env,
                                                    monkeypatch):
    import msprobe_atb.tree.manifest as manifest

    monkeypatch.setattr(manifest, "PART_ROWS", 1)  # every flush with rows writes a file
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    rounds = 300

    def round_step(r):
        return lambda: (a.tensor(r, "1_Layer", "before/intensor0.bin", task="statistics",
                                 stats={"count": 4, "max": 1.0, "min": 0.0, "mean": 0.5,
                                        "norm": 1.0, "nan": 0, "pinf": 0, "ninf": 0,
                                        "zero": 0}),
                        a.tensor(r, "1_Layer", "after/outtensor0.bin", task="statistics"))

    steps = [round_step(r) for r in range(rounds)] + [a.exit]
    live_build(dump_root, a, steps)  # a flush (and a file of its rows) per step
    files = list((dump_root / "manifest").rglob("*.parquet"))
    # 300 flushes = 1·256 + 2·16 + 12 in base FANIN: one file per non-zero digit's worth
    assert FANIN == 16 and len(files) == 1 + 2 + 12
    live = manifest_rows(dump_root)
    assert live.height == 2 * rounds
    assert live.get_column("round").unique().len() == rounds
    shutil.rmtree(dump_root / "manifest")
    rebuild(dump_root, a.block)
    assert manifest_rows(dump_root).equals(live)
    assert len(list((dump_root / "manifest").rglob("*.parquet"))) == 1


def test_names_that_are_not_utf8_keep_their_bytes_visible(out_dir, shims, two_nodes_env):
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    # the record log carries a non-UTF-8 byte as a surrogate escape (tree/names.py)
    a.tensor(0, "2_L\udcffx", "before/intensor0.bin", task="statistics")
    a.tensor(0, "2_L\udcffx", "after/outtensor0.bin", task="statistics", note="odd \udcfe")
    a.exit()
    rebuild(dump_root, a.block)
    rows = manifest_rows(dump_root)
    assert rows.get_column("op_name").to_list() == ["L\\xffx", "L\\xffx"]
    assert rows.get_column("note").to_list() == [None, "odd \\xfe"]
