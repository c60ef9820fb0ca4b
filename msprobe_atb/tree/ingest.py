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

import ctypes
import os
from dataclasses import dataclass

from msprobe_atb.tree.names import text_of
from msprobe_atb.tree.records import RoundKey
from msprobe_atb.tree.vocab import DTYPE_NAMES, FORMAT_NAMES

from ._ingest import ffi, lib

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
    waiting_bytes: int  # of which the rows not released yet take
    min_offset: int     # of the earliest record of a held row, -1 none
    min_line: int


_capsule = ctypes.pythonapi.PyCapsule_New
_capsule.restype = ctypes.py_object
_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _ArrowStruct:
    """An exported Arrow array as the PyCapsule interface hands it to polars
    (which moves it out: its release becomes NULL)."""

    def __init__(self, schema, array):
        self._schema, self._array = schema, array

    def __arrow_c_array__(self, requested_schema=None):
        def capsule(ptr, name: bytes):
            return _capsule(int(ffi.cast("uintptr_t", ptr)), name, None)

        return capsule(self._schema, b"arrow_schema"), capsule(self._array, b"arrow_array")


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

    def release_seq(self, below: int) -> None:
        """Releases the rows whose seq is below `below`."""
        lib.ing_release_seq(self._p, below)

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
        """The manifest rows taken since the last call, as a polars frame of
        tree/manifest.py's COLUMNS and `_part` (each row's "{dev}_{pid}"), imported
        from the kernel's Arrow columns."""
        import polars as pl

        schema = ffi.new("struct ArrowSchema *")
        array = ffi.new("struct ArrowArray *")
        if lib.ing_manifest_export(self._p, schema, array) < 0:
            raise IngestMemoryError("out of memory")
        try:
            return pl.Series(_ArrowStruct(schema, array)).struct.unnest()
        finally:  # whatever polars did not take is given back
            if array.release != ffi.NULL:
                array.release(array)
            if schema.release != ffi.NULL:
                schema.release(schema)

    def state(self) -> State:
        s = self._state
        lib.ing_get_state(self._p, s)
        last = round_key(ffi.buffer(s.last_round, s.last_round_n)[:]) if s.last_round_n else None
        return State(s.last_seq, last, s.dev if s.dev >= 0 else None, s.held_rows,
                     s.held_bytes, s.waiting_bytes, s.min_offset, s.min_line)
