"""The ingest kernel (native/ingest) on the records the shim writes: each kind of
file and statistics form, its doubles printed as the Python path prints them, its
manifest batches in the manifest's columns. The kernel against the Python path on
Hypothesis-made records, odd ones included, is the ingest fuzzer
(tests/fuzz/ingest_properties.py)."""

from __future__ import annotations

import json
import math

import polars as pl

from msprobe_atb.tree.csvfmt import positional
from msprobe_atb.tree.ingest import Ingest
from msprobe_atb.tree.manifest import polars_schema

ROOT = "/data/out"
START_NS = 1_765_000_000_000_000_000


def shim_record(seq: int, path: str, **fields) -> bytes:
    """A record as the shim writes it (keys in its order, doubles in hex)."""
    rec = {"k": "tensor", "t": START_NS + seq, "seq": seq, "path": path, "format": 2,
           "dtype": 1, "dims": "4,8192", "size": 65536, "task": "statistics", "file": "none",
           "stats": {"count": 32768, "max": (3.25).hex(), "min": (-0.1).hex(),
                     "mean": (1e-7).hex(), "norm": (123.456).hex(), "nan": 0, "pinf": 0,
                     "ninf": 0, "zero": 2}}
    rec.update(fields)
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def test_the_shims_records_are_the_kernels():
    """What the shim writes never needs the Python path: a record of each kind of
    file, statistics of every form, odd but legal names."""
    lines = [
        shim_record(1, "0_4711/3/2_Layer/0_LinearOperation/before/intensor0_x.bin"),
        shim_record(2, "0_4711/3/2_Layer/after/outtensor0.bin", task="all", file="bin",
                    hash="0123456789abcdef"),
        shim_record(3, "0_4711/3/2_Layer/1_Add/after/outtensor0.bin", task="all",
                    file="linked", alias="../../after/outtensor0.bin"),
        shim_record(4, "0_4711/3/2_Layer/2_Op/before/intensor1.bin", task="tensor",
                    file="lost", stats=None, note="cannot write the .bin: No space left"),
        shim_record(5, "0_4711/3/9_L\udcff,\"x\"/after/outtensor0.bin", dtype=3,
                    stats={"count": 4, "max": 9, "min": -7, "mean": "nan", "norm": "inf",
                           "nan": 1, "pinf": 0, "ninf": 0, "zero": 0}),
        shim_record(6, "-1_4711/3/2_Layer/after/outtensor0.bin", stats=None, note="empty tensor"),
    ]
    ing = Ingest(START_NS)
    ing.set_root(ROOT.encode())
    data = b"".join(lines)
    assert ing.feed(data, 0, 0, 0) == (len(data), data.count(b"\n"), False)


def test_doubles_are_printed_as_the_python_path_prints_them():
    """Every statistic.csv cell is csvfmt.positional of its double and a double in
    statistic_extra.csv is its repr (the kernel's shortest digits,
    native/ingest/shortest.c, in either layout): random bit patterns, every fp16
    and bf16 value."""
    import numpy as np

    rng = np.random.default_rng(5)
    with np.errstate(invalid="ignore"):  # NaN patterns among the bits: dropped below
        values = [*rng.integers(0, 2**64, 20_000, dtype=np.uint64).view(np.float64),
                  *np.arange(2**16, dtype=np.uint16).view(np.float16).astype(np.float64),
                  *(np.arange(2**16, dtype=np.uint32) << 16).astype(np.uint32)
                  .view(np.float32).astype(np.float64)]
    values = [float(v) for v in values if math.isfinite(v)]
    data = b"".join(shim_record(i, f"0_4711/0/2_L/after/outtensor{i}.bin",
                                stats={"count": v, "max": v.hex(), "min": v, "mean": 0.0,
                                       "norm": 0.0, "nan": 0, "pinf": 0, "ninf": 0, "zero": 0})
                    for i, v in enumerate(values))
    ing = Ingest(START_NS)
    ing.set_root(ROOT.encode())
    assert ing.feed(data, 0, 0, 0) == (len(data), data.count(b"\n"), False)
    ing.release(1 << 62)
    taken = ing.take(b"0_4711/0", 0, -1)
    rows = taken.stat.decode().splitlines()
    assert [row.split(",")[10:12] for row in rows] == [[positional(v)] * 2 for v in values]
    assert all("e" not in row and float(row.split(",")[10]) == v for row, v in zip(rows, values))
    extra = taken.extra.decode().splitlines()
    assert [row.split(",")[5] for row in extra] == [repr(v) for v in values]
    frame = ing.manifest_frame()
    assert frame.get_column("max").to_list() == frame.get_column("min").to_list() == values


def test_manifest_batches_come_as_the_manifests_columns():
    """The kernel's Arrow export is manifest.py's schema, column for column, then
    `_part`; a batch is handed over once (the next is empty), and nulls stay nulls."""
    ing = Ingest(START_NS)
    ing.set_root(ROOT.encode())
    data = b"".join(shim_record(i, f"0_4711/{i % 2}/2_L/after/outtensor{i}.bin", stats=None)
                    for i in range(1, 7))
    ing.feed(data, 0, 0, 0)
    ing.release(1 << 62)
    for key in (b"0_4711/0", b"0_4711/1"):
        ing.take(key, 0, -1)
    frame = ing.manifest_frame()
    assert frame.schema == pl.Schema({**polars_schema(), "_part": pl.Utf8})
    assert frame.height == 6 and frame.get_column("max").null_count() == 6
    assert frame.get_column("_part").to_list() == ["0_4711"] * 6
    assert frame.get_column("round").to_list() == [0] * 3 + [1] * 3
    assert frame.get_column("start_ns").to_list() == [START_NS] * 6
    assert ing.manifest_frame().height == 0
