"""Concatenating Parquet files of one schema without decoding them: their row
groups' bytes are copied as they are, and a new footer lists them all.

A manifest merge (tree/manifest.py) only puts files of one process together, in
order: decoding and encoding every row again cost as much as writing it the
first time (~0.7 us a row on one core, once per merge level), and polars'
streaming merge held tens of MB while it ran. Here a merge costs a copy of the
bytes and a footer of a few KB, in constant memory.

Parquet (github.com/apache/parquet-format): "PAR1", the row groups' column
chunks, the page indexes (ColumnIndex, OffsetIndex), the footer (FileMetaData,
Thrift compact protocol), its length (4 bytes, little-endian), "PAR1". Copied to
a new place, a row group needs its absolute offsets moved: RowGroup.file_offset,
ColumnChunk.file_offset, ColumnMetaData's data, index, dictionary page and bloom
filter offsets, and the page locations inside each OffsetIndex, which is
decoded, moved and encoded again. The footer is decoded into a generic tree
(field id, type, value), so fields this module does not know are kept as they
are. Files whose schemas or key-value metadata differ are refused (NotConcatenable):
the caller then merges them by decoding."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import BinaryIO

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
    write_varint,
    write_zigzag,
)

MAGIC = b"PAR1"
COPY_CHUNK = 1 << 20

# field ids (parquet.thrift)
FMD_SCHEMA, FMD_NUM_ROWS, FMD_ROW_GROUPS, FMD_KV = 2, 3, 4, 5
RG_COLUMNS, RG_FILE_OFFSET, RG_ORDINAL = 1, 5, 7
CC_FILE_OFFSET, CC_META = 2, 3
CC_OFFSET_INDEX, CC_OFFSET_INDEX_LEN, CC_COLUMN_INDEX, CC_COLUMN_INDEX_LEN = 4, 5, 6, 7
CMD_TOTAL_COMPRESSED = 7
CMD_OFFSETS = (9, 10, 11, 14)  # data, index and dictionary page, bloom filter
OI_PAGES, PL_OFFSET = 1, 1

Field = list  # [field id, type, value]


class NotConcatenable(ValueError):
    """Files that cannot be put together as they are."""


# ---- Thrift compact protocol: a generic decoder and encoder ----

class _Reader(CompactReader):
    def __init__(self, data: bytes):
        super().__init__(data, NotConcatenable)

    def value(self, t: int):
        if t in (T_TRUE, T_FALSE):  # a list element (a field's is in its type): kept as sent
            return self.byte()
        if t == T_BYTE:
            return self.byte()
        if t in (T_I16, T_I32, T_I64):
            return self.zigzag()
        if t == T_DOUBLE:
            return self.take(8)
        if t == T_BINARY:
            return self.take(self.varint())
        if t in (T_LIST, T_SET):
            n, et = self.list_head()
            return (et, [self.value(et) for _ in range(n)])
        if t == T_MAP:
            n = self.varint()
            if not n:
                return (0, 0, [])
            kv = self.byte()
            kt, vt = kv >> 4, kv & 0x0F
            return (kt, vt, [(self.value(kt), self.value(vt)) for _ in range(n)])
        if t == T_STRUCT:
            return self.struct()
        raise NotConcatenable(f"unknown Thrift type {t}")

    def struct(self) -> list[Field]:
        fields: list[Field] = []
        fid = 0
        while True:
            head = self.byte()
            if head == 0:
                return fields
            delta, t = head >> 4, head & 0x0F
            fid = fid + delta if delta else self.zigzag()
            fields.append([fid, t, None if t in (T_TRUE, T_FALSE) else self.value(t)])


def _write_value(out: bytearray, t: int, v) -> None:
    if t in (T_TRUE, T_FALSE, T_BYTE):
        out.append(v)
    elif t in (T_I16, T_I32, T_I64):
        write_zigzag(out, v)
    elif t == T_DOUBLE:
        out += v
    elif t == T_BINARY:
        write_varint(out, len(v))
        out += v
    elif t in (T_LIST, T_SET):
        et, items = v
        if len(items) < 15:
            out.append(len(items) << 4 | et)
        else:
            out.append(0xF0 | et)
            write_varint(out, len(items))
        for item in items:
            _write_value(out, et, item)
    elif t == T_MAP:
        kt, vt, items = v
        write_varint(out, len(items))
        if items:
            out.append(kt << 4 | vt)
            for k, val in items:
                _write_value(out, kt, k)
                _write_value(out, vt, val)
    elif t == T_STRUCT:
        _write_struct(out, v)
    else:
        raise NotConcatenable(f"unknown Thrift type {t}")


def _write_struct(out: bytearray, fields: list[Field]) -> None:
    last = 0
    for fid, t, v in fields:  # a boolean field's value is its type
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            write_zigzag(out, fid)
        last = fid
        if t not in (T_TRUE, T_FALSE):
            _write_value(out, t, v)
    out.append(0)


def encode(fields: list[Field]) -> bytes:
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


def decode(data: bytes) -> list[Field]:
    return _Reader(data).struct()


def _get(fields: list[Field], fid: int) -> Field | None:
    return next((f for f in fields if f[0] == fid), None)


# ---- files ----

def _footer(f: BinaryIO) -> tuple[list[Field], int]:
    """A file's FileMetaData and where it starts."""
    f.seek(0, 2)
    size = f.tell()
    if size < 12:
        raise NotConcatenable("too short for a Parquet file")
    f.seek(size - 8)
    tail = f.read(8)
    n = struct.unpack("<I", tail[:4])[0]
    if tail[4:] != MAGIC or n > size - 12:
        raise NotConcatenable("no Parquet footer")
    f.seek(size - 8 - n)
    return decode(f.read(n)), size - 8 - n


def _chunks(meta: list[Field]) -> list[list[Field]]:
    """The column chunks of every row group, in order."""
    return [cc for rg in _get(meta, FMD_ROW_GROUPS)[2][1] for cc in _get(rg, RG_COLUMNS)[2][1]]


def _data_end(meta: list[Field]) -> int:
    """Where the last column chunk's pages end (the page indexes come after)."""
    end = len(MAGIC)
    for cc in _chunks(meta):
        cmd = _get(cc, CC_META)[2]
        starts = [f[2] for f in cmd if f[0] in CMD_OFFSETS[:3] and f[2] is not None and f[2] > 0]
        end = max(end, min(starts) + _get(cmd, CMD_TOTAL_COMPRESSED)[2])
    return end


def _move(fields: list[Field], fids: Sequence[int], delta: int) -> None:
    for f in fields:
        if f[0] in fids and isinstance(f[2], int):
            f[2] += delta


def _copy(src: BinaryIO, dst: BinaryIO, start: int, end: int) -> None:
    src.seek(start)
    left = end - start
    while left > 0:
        block = src.read(min(COPY_CHUNK, left))
        if not block:
            raise NotConcatenable("file shorter than its footer says")
        dst.write(block)
        left -= len(block)


def _index(src: BinaryIO, cc: list[Field], off_fid: int, len_fid: int) -> bytes | None:
    off, n = _get(cc, off_fid), _get(cc, len_fid)
    if off is None or n is None:
        return None
    src.seek(off[2])
    return src.read(n[2])


def concatenate(sources: Sequence[BinaryIO], dst: BinaryIO) -> int:
    """Writes into `dst` (at its start) one Parquet file holding the row groups
    of `sources` in order; returns its rows. Raises NotConcatenable (nothing
    useful written) when the files are not of one schema and metadata."""
    metas = [_footer(src)[0] for src in sources]
    if not metas:
        raise NotConcatenable("no files")
    first = metas[0]
    for meta in metas[1:]:
        for fid in (FMD_SCHEMA, FMD_KV):
            if _get(meta, fid) != _get(first, fid):
                raise NotConcatenable("files of different schemas or metadata")
    dst.write(MAGIC)
    pos = len(MAGIC)
    row_groups, indexes = [], []
    for src, meta in zip(sources, metas):
        end = _data_end(meta)
        _copy(src, dst, len(MAGIC), end)
        delta = pos - len(MAGIC)
        pos += end - len(MAGIC)
        for rg in _get(meta, FMD_ROW_GROUPS)[2][1]:
            _move(rg, (RG_FILE_OFFSET,), delta)
            for cc in _get(rg, RG_COLUMNS)[2][1]:
                _move(cc, (CC_FILE_OFFSET,), delta)
                _move(_get(cc, CC_META)[2], CMD_OFFSETS, delta)
                column_index = _index(src, cc, CC_COLUMN_INDEX, CC_COLUMN_INDEX_LEN)
                offset_index = _index(src, cc, CC_OFFSET_INDEX, CC_OFFSET_INDEX_LEN)
                if offset_index is not None:
                    oi = decode(offset_index)
                    for page in _get(oi, OI_PAGES)[2][1]:
                        _move(page, (PL_OFFSET,), delta)
                    offset_index = encode(oi)
                indexes.append((cc, column_index, offset_index))
            row_groups.append(rg)
    # the page indexes after all the pages, column indexes first (as writers lay them)
    for which, fid_off, fid_len in ((1, CC_COLUMN_INDEX, CC_COLUMN_INDEX_LEN),
                                    (2, CC_OFFSET_INDEX, CC_OFFSET_INDEX_LEN)):
        for entry in indexes:
            blob = entry[which]
            if blob is None:
                continue
            dst.write(blob)
            _get(entry[0], fid_off)[2] = pos
            _get(entry[0], fid_len)[2] = len(blob)
            pos += len(blob)
    for i, rg in enumerate(row_groups):
        ordinal = _get(rg, RG_ORDINAL)
        if ordinal is not None:
            ordinal[2] = i
    rows = sum(_get(meta, FMD_NUM_ROWS)[2] for meta in metas)
    footer = [list(f) for f in first]
    _get(footer, FMD_NUM_ROWS)[2] = rows
    _get(footer, FMD_ROW_GROUPS)[2] = (T_STRUCT, row_groups)
    raw = encode(footer)
    dst.write(raw + struct.pack("<I", len(raw)) + MAGIC)
    return rows
