"""The sizes a Parquet file declares in its footer, read without decoding any data.

A Parquet file ends with its metadata (Thrift compact protocol), its length (4
bytes, little-endian) and `PAR1`. `footer_sizes` walks that metadata for the
file's row count and, per row group, its uncompressed bytes (the larger of the
group's `total_byte_size` and its column chunks' sizes): what a reader will
allocate to decode the file. The walk is bounded (MAX_FOOTER bytes, MAX_DEPTH
nesting, every length checked against the bytes left) and raises FooterError
for anything malformed.

It also checks what polars trusts without checking: a column chunk whose byte
range runs outside the file's data, whose value count is not its group's row
count (the manifest's columns are flat: one value per row), or that lives in
another file; row groups whose rows do not add up to the file's. polars 2.1
panics on each of these (a Rust assertion, raised as a BaseException) instead
of raising an error.
"""

from __future__ import annotations

import os
import struct

from msprobe_atb.tree.thrift_compact import (
    T_BINARY,
    T_BYTE,
    T_DOUBLE,
    T_FALSE,
    T_I16,
    T_I32,
    T_I64,
    T_LIST,
    T_MAP,
    T_SET,
    T_STRUCT,
    T_TRUE,
    CompactReader,
)

MAX_FOOTER = 16 << 20
MAX_DEPTH = 16


class FooterError(ValueError):
    pass


class _Reader(CompactReader):
    def __init__(self, buf: bytes):
        super().__init__(buf, FooterError)

    def value(self, kind: int, depth: int, want: dict | None = None):
        """Reads (or skips) one value; a struct's wanted fields go into `want`."""
        if depth > MAX_DEPTH:
            raise FooterError("metadata nested too deep")
        if kind in (T_TRUE, T_FALSE):
            return kind == T_TRUE
        if kind == T_BYTE:
            return self.byte()
        if kind in (T_I16, T_I32, T_I64):
            return self.zigzag()
        if kind == T_DOUBLE:
            self.skip(8)
        elif kind == T_BINARY:
            self.skip(self.varint())
        elif kind in (T_LIST, T_SET):
            n, et = self.list_head()
            return [self.value(et, depth + 1, want) for _ in range(n)]
        elif kind == T_MAP:
            n = self.varint()
            if n:
                kv = self.byte()
                for _ in range(n):
                    self.value(kv >> 4, depth + 1)
                    self.value(kv & 0x0F, depth + 1)
        elif kind == T_STRUCT:
            return self.struct(depth + 1, want)
        else:
            raise FooterError(f"unknown field type {kind}")
        return None

    def struct(self, depth: int, want: dict | None = None) -> dict:
        """{field id: value} of the fields in `want` ({id: nested want}); others skipped."""
        out, fid = {}, 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            delta, kind = head >> 4, head & 0x0F
            fid = fid + delta if delta else self.zigzag()
            sub = (want or {}).get(fid, False)
            v = self.value(kind, depth, sub or None)
            if sub is not False:
                out[fid] = v


# FileMetaData: 3 num_rows, 4 row_groups. RowGroup: 1 columns, 2 total_byte_size,
# 3 num_rows. ColumnChunk: 1 file_path, 3 meta_data. ColumnMetaData: 5 num_values,
# 6 total_uncompressed_size, 7 total_compressed_size, 9 data_page_offset,
# 11 dictionary_page_offset.
_CHUNK = {1: None, 3: {5: None, 6: None, 7: None, 9: None, 11: None}}
_WANT = {3: None, 4: {1: _CHUNK, 2: None, 3: None}}


def _int(d: dict, fid: int, what: str) -> int:
    v = d.get(fid)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise FooterError(f"{what} missing or negative")
    return v


def _chunk_bytes(chunk, rows: int, data_end: int) -> int:
    """A column chunk's uncompressed bytes, once its place and count are checked."""
    if not isinstance(chunk, dict) or not isinstance(chunk.get(3), dict):
        raise FooterError("a column chunk without its metadata")
    if 1 in chunk:
        raise FooterError("a column chunk stored in another file")
    m = chunk[3]
    if _int(m, 5, "a column chunk's value count") != rows:
        raise FooterError(f"a column chunk holds {m[5]} values for {rows} rows")
    start = m.get(11) or _int(m, 9, "a column chunk's data offset")
    if not isinstance(start, int) or start < 4 or \
            start + _int(m, 7, "a column chunk's size") > data_end:
        raise FooterError(f"a column chunk's bytes ({start}+{m[7]}) lie outside the "
                          f"{data_end} bytes of data")
    return _int(m, 6, "a column chunk's uncompressed size")


def footer_sizes(path: str | os.PathLike) -> tuple[int, int]:
    """(rows, uncompressed bytes of all column data) the file's footer declares."""
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < 12:
            raise FooterError("shorter than a Parquet header and footer")
        f.seek(size - 8)
        length, magic = struct.unpack("<I4s", f.read(8))
        if magic != b"PAR1":
            raise FooterError("does not end with PAR1")
        if length > min(MAX_FOOTER, size - 12):
            raise FooterError(f"footer of {length} bytes does not fit")
        f.seek(size - 8 - length)
        meta = _Reader(f.read(length)).struct(0, _WANT)
    groups = meta.get(4) or []
    rows = _int(meta, 3, "the row count")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise FooterError("row groups unreadable")
    total = 0
    for g in groups:
        n = _int(g, 3, "a row group's row count")
        chunks = g.get(1)
        if not isinstance(chunks, list):
            raise FooterError("a row group without columns")
        total += max(g.get(2) or 0, sum(_chunk_bytes(c, n, size - 8 - length) for c in chunks))
    if sum(g[3] for g in groups) != rows:
        raise FooterError(f"row groups hold {sum(g[3] for g in groups)} rows, the file {rows}")
    return rows, total
