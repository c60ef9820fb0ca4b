"""The ingest kernel (native/ingest) against the Python path, its reference, as a
fuzz property: for every tensor record the kernel takes, its statistic.csv and
statistic_extra.csv lines are byte for byte the Python path's and its manifest row is
the Python path's row; the records it leaves are read by the Python path, whose
manifest cells cross the kernel (manifest_cells) unchanged. Hypothesis makes the
records, odd ones included. `make fuzz` runs it long (ingest_fuzz.py), `make test`
briefly (test_ingest_fuzz.py)."""

from __future__ import annotations

import json
import math
import struct

import polars as pl
from hypothesis import strategies as st

from msprobe_atb.tree.csvfmt import extra_row, parse_tensor_path, statistic_row
from msprobe_atb.tree.ingest import Ingest, key_bytes, manifest_cells
from msprobe_atb.tree.manifest import COLUMN_NAMES, record_row
from msprobe_atb.tree.names import text_of

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


def kernel_lines_are_the_python_paths(rec: dict, ascii_only: bool, spaced: bool) -> None:
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


INPUTS = st.tuples(tensor_records(), st.booleans(), st.booleans())
