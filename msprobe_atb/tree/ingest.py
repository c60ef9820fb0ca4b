"""The ingest kernel (native/ingest) for one process's record log: it turns the
tensor, param and round records it understands into the rows of statistic.csv,
statistic_extra.csv and the manifest, holds each round's rows until they may
be appended in sequence order, and hands them over sorted. Records it leaves
(any other kind, anything unusual) are read by the builder's Python path, which
hands back what it made of them (add_row, param, round_said).

Names cross as bytes: a round key is "{dev}_{pid}/{exec}" as the file system
has it; the builder's RoundKey is its two parts as Python holds them
(surrogateescape). The manifest rows of the rows taken come back in columns
(manifest_frame), their strings in names.py's text form."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from msprobe_atb.tree.names import text_of
from msprobe_atb.tree.vocab import DTYPE_NAMES, FORMAT_NAMES

from ._ingest import ffi, lib

RoundKey = tuple[str, str]  # ("{dev}_{pid}", "{exec}")

for _kind, _table in enumerate((DTYPE_NAMES, FORMAT_NAMES)):
    for _code, _name in _table.items():
        _raw = _name.encode()
        lib.ing_set_name(_kind, _code, _raw, len(_raw))


class IngestMemoryError(MemoryError):
    """The kernel ran out of memory."""


# The manifest columns the kernel carries (ingest.h ING_MI_*, ING_MD_*, ING_MS_*).
INT_COLUMNS = ("seq", "count", "nan", "pinf", "ninf", "zero", "bytes", "time")
DOUBLE_COLUMNS = ("max", "min", "mean", "norm")
STRING_COLUMNS = ("op_id", "op_name", "op_type", "stage", "io", "index", "dtype", "format",
                  "shape", "path", "hash", "alias", "status", "note")
_HEAD = ffi.sizeof("ing_man_head")


def manifest_cells(row: dict) -> bytes:
    """A manifest row (column name -> value, tree/manifest.py record_row's) as the
    kernel keeps its cells: an ing_man_head, then each string column's length and
    text form. `path` without its "data/". The integer columns are 64-bit: a
    record's larger number is null there (statistic.csv has it)."""
    head = ffi.new("ing_man_head *")
    valid = 0
    for k, name in enumerate(INT_COLUMNS):
        if row[name] is not None and -2**63 <= row[name] < 2**63:
            head.i[k] = row[name]
            valid |= 1 << k
    for k, name in enumerate(DOUBLE_COLUMNS):
        if row[name] is not None:
            head.d[k] = row[name]
            valid |= 1 << (8 + k)
    strings = []
    for k, name in enumerate(STRING_COLUMNS):
        value = row[name]
        if name == "path" and value is not None:
            value = value.removeprefix("data/")
        raw = text_of(value).encode() if value is not None else b""
        valid |= (value is not None) << (12 + k)
        strings.append(len(raw).to_bytes(4, "little") + raw)
    head.valid = valid
    return ffi.buffer(head, _HEAD)[:] + b"".join(strings)


def key_bytes(key: RoundKey) -> bytes:
    """A round key as the kernel holds it (UnicodeEncodeError for a name that no
    bytes make: such a record is the Python path's to refuse)."""
    return f"{key[0]}/{key[1]}".encode("utf-8", "surrogateescape")


def round_key(raw: bytes) -> RoundKey:
    dev_pid, _, exec_count = os.fsdecode(raw).partition("/")
    return dev_pid, exec_count


@dataclass
class RoundInfo:
    key: RoundKey
    held: int           # rows the kernel holds
    params_lost: int    # since the last look
    max_t: int
    tensors: bool       # tensor records were read since the last look
    said: bool          # the last of its records since then was a round record


@dataclass
class Taken:
    rows: int
    lost: int
    first_seq: int
    last_seq: int
    late: bool          # its first row sorts before rows already appended
    stat: bytes
    extra: bytes


@dataclass
class State:
    last_seq: int
    last_round: RoundKey | None
    dev: int | None
    held_rows: int
    held_bytes: int
    min_offset: int     # of the earliest record of a held row, -1 none
    min_line: int


class Ingest:
    def __init__(self, start_ns: int):
        self._p = ffi.gc(lib.ing_proc_new(start_ns), lib.ing_proc_free)
        if self._p == ffi.NULL:
            raise IngestMemoryError("cannot start the ingest kernel")
        self._stopped = ffi.new("int32_t *")
        self._lines = ffi.new("int64_t *")
        self._rounds = ffi.new("const ing_round **")
        self._keys = ffi.new("const char **")
        self._taken = ffi.new("ing_taken *")
        self._state = ffi.new("ing_state *")
        self._manifest = ffi.new("ing_manifest *")
        self.start_ns = start_ns

    def set_root(self, root: bytes) -> None:
        if lib.ing_set_root(self._p, root, len(root)) < 0:
            raise IngestMemoryError("out of memory")

    def feed(self, data: bytes, start: int, offset: int, line: int) -> tuple[int, int, bool]:
        """Reads data[start:] (whole lines, the log's bytes from `offset`, line
        number `line` first): (bytes taken, lines taken, stopped before a line for
        Python)."""
        view = ffi.from_buffer(data)
        taken = lib.ing_feed(self._p, view + start, len(data) - start, offset, line,
                             self._lines, self._stopped)
        if self._stopped[0] < 0:
            raise IngestMemoryError("the ingest kernel ran out of memory")
        return taken, self._lines[0], self._stopped[0] == 1

    def add_row(self, key: bytes, seq: int | None, t: int, offset: int, line: int, lost: bool,
                stat: bytes, extra: bytes, man: bytes) -> None:
        """A tensor record the Python path read: its two lines and its manifest
        cells (manifest_cells)."""
        if lib.ing_add_row(self._p, key, len(key), seq or 0, seq is not None, t, offset, line,
                           lost, stat, len(stat), extra, len(extra), man, len(man)) < 0:
            raise IngestMemoryError("out of memory")

    def param(self, key: bytes, seq: int | None, t: int, lost: bool) -> None:
        if lib.ing_param(self._p, key, len(key), seq or 0, seq is not None, t, lost) < 0:
            raise IngestMemoryError("out of memory")

    def round_said(self, key: bytes) -> None:
        if lib.ing_round_said(self._p, key, len(key)) < 0:
            raise IngestMemoryError("out of memory")

    def release(self, below: int) -> None:
        """Releases the rows whose record lies below log offset `below`."""
        lib.ing_release(self._p, below)

    def rounds(self) -> list[RoundInfo]:
        """The rounds holding rows or touched since the last call."""
        n = lib.ing_rounds(self._p, self._rounds, self._keys)
        if n < 0:
            raise IngestMemoryError("out of memory")
        out = []
        if n:
            entries = self._rounds[0]
            total = entries[n - 1].key_at + entries[n - 1].key_n
            keys = ffi.buffer(self._keys[0], total)[:]
            for i in range(n):
                e = entries[i]
                out.append(RoundInfo(round_key(keys[e.key_at:e.key_at + e.key_n]), e.held,
                                     e.params_lost, e.max_t, bool(e.tensors), e.said == 1))
        return out

    def held(self, key: bytes) -> int:
        return lib.ing_held(self._p, key, len(key))

    def take(self, key: bytes, base: int, after_seq: int) -> Taken | None:
        """The round's released rows, sorted (manifest round_seq from `base`)."""
        n = lib.ing_take(self._p, key, len(key), base, after_seq, self._taken)
        if n < 0:
            raise IngestMemoryError("out of memory")
        if n == 0:
            return None
        t = self._taken
        return Taken(t.rows, t.lost, t.first_seq, t.last_seq, bool(t.late),
                     ffi.buffer(t.stat, t.stat_n)[:], ffi.buffer(t.extra, t.extra_n)[:])

    def manifest_rows(self) -> int:
        """Rows taken whose manifest rows wait in the kernel."""
        return lib.ing_manifest_rows(self._p)

    def manifest_frame(self):
        """The manifest rows taken since the last call, as a polars frame in
        tree/manifest.py's COLUMNS, with the round key of each in `_key`."""
        import polars as pl

        from msprobe_atb.tree.manifest import COLUMN_NAMES, polars_schema

        m = self._manifest
        if lib.ing_manifest_take(self._p, m) < 0:
            raise IngestMemoryError("out of memory")
        n = m.n

        def column(ptr, dtype) -> np.ndarray:
            return np.frombuffer(ffi.buffer(ptr, n * np.dtype(dtype).itemsize), dtype).copy()

        valid = column(m.valid, np.uint32)
        if m.dict_nul:  # a name with a NUL of its own: cut at the offsets
            at = np.frombuffer(ffi.buffer(m.dict_at, (m.n_dict + 1) * 8), np.int64)
            raw = ffi.buffer(m.dict, m.dict_n)[:]
            values = pl.Series([raw[a:b - 1].decode() for a, b in zip(at[:-1], at[1:])],
                               dtype=pl.Utf8)
        else:
            text = ffi.buffer(m.dict, m.dict_n)[:-1].decode() if m.n_dict else ""
            values = pl.Series([text], dtype=pl.Utf8).str.split("\x00").explode() \
                if m.n_dict else pl.Series([], dtype=pl.Utf8)
        values = values.append(pl.Series([None], dtype=pl.Utf8))  # index n_dict: null

        def strings(k: int) -> pl.Series:
            codes = column(m.codes[k], np.uint32)
            codes[codes == 0xFFFFFFFF] = m.n_dict
            return values.gather(codes)

        cols: dict = {"round": column(m.round, np.int64),
                      "round_seq": column(m.round_seq, np.int64)}
        for k, name in enumerate(INT_COLUMNS):
            cols[name] = pl.Series(name, column(m.i[k], np.int64)).set(
                pl.Series((valid >> k) & 1 == 0), None)
        for k, name in enumerate(DOUBLE_COLUMNS):
            cols[name] = pl.Series(name, column(m.d[k], np.float64)).set(
                pl.Series((valid >> (8 + k)) & 1 == 0), None)
        for k, name in enumerate(STRING_COLUMNS):
            cols[name] = strings(k)
        key = strings(len(STRING_COLUMNS))
        keyed = pl.Series(column(m.keyed, np.uint8) == 1)
        frame = pl.DataFrame({**cols, "_key": key, "_keyed": keyed}).with_columns(
            pl.when(pl.col("_keyed")).then(pl.concat_str(
                [pl.lit("data/"), pl.col("_key"), pl.lit("/"), pl.col("path")]))
            .otherwise(pl.concat_str([pl.lit("data/"), pl.col("path")])).alias("path"),
            pl.lit(self.start_ns, pl.Int64).alias("start_ns"),
            pl.lit(0.0, pl.Float64).alias("stat_step"))
        schema = polars_schema()
        return frame.select([pl.col(c).cast(schema[c]) for c in COLUMN_NAMES] + ["_key"])

    def state(self) -> State:
        s = self._state
        lib.ing_get_state(self._p, s)
        last = round_key(ffi.buffer(s.last_round, s.last_round_n)[:]) if s.last_round_n else None
        return State(s.last_seq, last, s.dev if s.dev >= 0 else None, s.held_rows,
                     s.held_bytes, s.min_offset, s.min_line)
