"""The ingest kernel (native/ingest) against the Python path, its reference: for
every tensor record the kernel takes, its statistic.csv and statistic_extra.csv
lines are byte for byte the Python path's and its manifest row is the Python
path's row; the records it leaves are read by the Python path, whose manifest
cells cross the kernel (manifest_cells) unchanged. Hypothesis makes the records,
odd ones included."""

from __future__ import annotations

import json
import math
import struct

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msprobe_atb.tree.csvfmt import extra_row, parse_tensor_path, positional, statistic_row
from msprobe_atb.tree.ingest import Ingest, key_bytes, manifest_cells
from msprobe_atb.tree.manifest import COLUMN_NAMES, polars_schema, record_row
from msprobe_atb.tree.names import text_of

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

ROOT = "/data/out"
START_NS = 1_765_000_000_000_000_000

def mostly(typical, odd):
    """Usually a typical value (as the shim writes it), sometimes an odd one: the
    kernel must take the first and may leave the second, never get either wrong."""
    return st.integers(0, 19).flatmap(lambda roll: odd if roll == 0 else typical)


# names: plain, and every kind of byte the CSV, the manifest's text form and the
# formula guard treat apart
ODD_CHARS = [",", '"', "\n", "\r", "\\", "=", "+", "-", "@", "\t", " ", ".", "é", "\udcff",
             "\x00", "\u00ff", "𝔘", "\udcfe"]
names = mostly(st.text(st.sampled_from(list("abcLayerOp_0123")), max_size=8),
               st.text(st.sampled_from(list("ab_1") + ODD_CHARS), max_size=6))
segment = mostly(st.builds(lambda i, n: f"{i}_{n}", st.integers(0, 40), names), names)
doubles = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                    st.builds(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0],
                              st.integers(0, 2**64 - 1)).filter(math.isfinite))
numbers = mostly(st.one_of(st.integers(-2**63, 2**63 - 1), st.integers(-10, 10), doubles,
                           doubles.map(float.hex), st.sampled_from(["nan", "inf", "-inf"]),
                           st.none()),
                 st.sampled_from(["+inf", "-nan", "NaN", " inf", "1.5", "abc", True,
                                  [1.0, "0x1p+1"], {}, 2**70]))
STAT_KEYS = ["count", "max", "min", "mean", "norm", "nan", "pinf", "ninf", "zero"]


@st.composite
def tensor_records(draw) -> dict:
    dev = draw(mostly(st.sampled_from(["0", "7", "15"]), st.sampled_from(["-1", "x", "-1_2"])))
    round_ = draw(mostly(st.integers(0, 500).map(str), st.sampled_from(["007", "-1", "r"])))
    ops = draw(st.lists(segment, min_size=0, max_size=3))
    stage = draw(st.sampled_from(["before", "after", "", "mid"]))
    file_name = draw(st.sampled_from(["intensor0.bin", "outtensor1_x.bin", "outtensor2.bin",
                                      "op_param.json", "intensor.bin", "weird"]))
    parts = [f"{dev}_4711", round_, *ops, *([stage] if stage else []), file_name]
    path = "/".join(parts)
    path = draw(mostly(st.just(path), st.sampled_from(["/", "//", "./", "../"]).map(
        lambda sep: sep.join([path, "x.bin"]))))
    fields = {
        "t": mostly(st.integers(0, 2**63 - 1), st.just("soon")),
        "seq": mostly(st.integers(0, 2**40), st.sampled_from([None, "7", -3])),
        "format": mostly(st.integers(0, 60), st.sampled_from(["2", 2.0, -1, 300])),
        "dtype": mostly(st.integers(0, 40), st.sampled_from([None, 999, -2])),
        "dims": mostly(st.lists(st.integers(0, 9999), max_size=4).map(
            lambda d: ",".join(map(str, d))), st.sampled_from([3, "a,-b", "=1"])),
        "size": mostly(st.integers(0, 2**40), st.just("8")),
        "task": mostly(st.sampled_from(["statistics", "all", "tensor"]),
                       st.sampled_from(["other", 1])),
        "file": mostly(st.sampled_from(["bin", "linked", "stub", "none", "lost"]),
                       st.sampled_from(["link", "odd", 0])),
        "hash": mostly(st.just("0123456789abcdef"), st.sampled_from(["", 5])),
        "alias": mostly(st.sampled_from(["../../before/intensor0.bin", "x.bin", "../y.bin"]),
                        st.one_of(st.sampled_from(["", "/abs.bin", "../../../../../up.bin", 3]),
                                  names)),
        "note": mostly(names, st.sampled_from(["hard link refused (EPERM): data= stub", 7])),
        "stats": mostly(st.fixed_dictionaries({}, optional={k: numbers for k in STAT_KEYS}),
                        st.one_of(st.none(), st.just([1, 2]), st.dictionaries(
                            st.sampled_from([*STAT_KEYS, "extra"]), numbers, max_size=10))),
    }
    rec: dict = {"k": "tensor", "path": path}
    for key, strategy in fields.items():
        if draw(st.integers(0, 19)) > 0:  # most fields present, as the shim writes them
            rec[key] = draw(strategy)
    return rec


def same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def reference_row(rec: dict, tp) -> dict:
    """The Python path's manifest row, strings in the text form, position 0."""
    row = dict(zip(COLUMN_NAMES, record_row(rec, tp, START_NS)))
    row = {k: text_of(v) if isinstance(v, str) else v for k, v in row.items()}
    row = {k: None if isinstance(v, int) and not -2**63 <= v < 2**63 else v
           for k, v in row.items()}  # the manifest's integers are 64-bit
    row["round_seq"] = 0
    if row["time"] is not None:
        row["time"] = pl.Series([row["time"]]).cast(pl.Datetime("ns", "UTC"))[0]
    return row


def python_rows(rec: dict) -> tuple[bytes, bytes, dict] | None:
    """The reference: the Python path's two lines and manifest row, None for a
    record it skips."""
    tp = parse_tensor_path(rec["path"])
    if tp is None:
        return None
    try:
        return (statistic_row(rec, tp, ROOT).encode("utf-8", "surrogateescape"),
                extra_row(rec, tp, ROOT).encode("utf-8", "surrogateescape"),
                reference_row(rec, tp))
    except (UnicodeEncodeError, ValueError, OverflowError):
        return None


def taken(ing: Ingest) -> tuple[bytes, bytes, dict]:
    """The one row a kernel holds, taken: its two lines and its manifest row."""
    ing.release(1 << 62)
    infos = ing.rounds()
    assert len(infos) == 1
    got = ing.take(key_bytes(infos[0].key), 0, -1)
    frame = ing.manifest_frame()
    assert got.rows == frame.height == 1
    return got.stat, got.extra, frame.drop("_part").row(0, named=True)


def kernel_rows(line: bytes) -> tuple[bytes, bytes, dict] | None:
    """The kernel's lines and row for one record line, None when it leaves it."""
    ing = Ingest(START_NS)
    ing.set_root(ROOT.encode())
    n, _, stopped = ing.feed(line, 0, 0, 0)
    if stopped:
        return None
    assert n == len(line)
    return taken(ing)


def through_kernel(rec: dict) -> tuple[bytes, bytes, dict]:
    """The Python path's lines and cells of a record, handed to the kernel as the
    tree builder hands them, and taken back."""
    stat, extra, row = python_rows(rec)
    ing = Ingest(START_NS)
    tp = parse_tensor_path(rec["path"])
    ing.add_row(key_bytes(tp.round_key), None, 0, 0, 0, False, stat, extra,
                manifest_cells(dict(zip(COLUMN_NAMES, record_row(rec, tp, START_NS)))))
    return taken(ing)


def assert_same(got: tuple, want: tuple, line: bytes) -> None:
    assert got[:2] == want[:2], line
    assert all(same(got[2][k], want[2][k]) for k in COLUMN_NAMES), (got[2], want[2], line)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_records(), st.booleans(), st.booleans())
def test_kernel_lines_are_the_python_paths(rec, ascii_only, spaced):
    line = json.dumps(rec, ensure_ascii=ascii_only,
                      separators=(", ", ": ") if spaced else (",", ":")).encode(
        "utf-8", "surrogatepass") + b"\n"
    want = python_rows(rec)
    if want is not None:
        # the rows the Python path makes cross the kernel unchanged
        assert_same(through_kernel(rec), want, line)
    got = kernel_rows(line)
    if got is None:
        return  # left to the Python path, which is the reference
    assert want is not None, line
    assert_same(got, want, line)


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
