"""Thrift's compact protocol, the encoding of a Parquet file's footer: its type
ids, a reader of its primitives that never reads past its buffer, and writers
of its integers. tree/parquet_concat.py decodes and re-encodes whole footers
with it; offline/read/parquet_footer.py walks them for the sizes it checks."""

from __future__ import annotations

# type ids
T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY = 1, 2, 3, 4, 5, 6, 7, 8
T_LIST, T_SET, T_MAP, T_STRUCT = 9, 10, 11, 12


class CompactReader:
    """Reads the primitives at `pos` of `buf`; what runs past the buffer, or a
    varint longer than 64 bits, raises `error` (the caller's ValueError)."""

    def __init__(self, buf: bytes, error: type[ValueError]):
        self.buf, self.pos, self.error = buf, 0, error

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise self.error("metadata ends early")
        self.pos += 1
        return self.buf[self.pos - 1]

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise self.error("varint longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error("a length runs past the metadata")
        self.pos += n

    def take(self, n: int) -> bytes:
        self.skip(n)
        return self.buf[self.pos - n:self.pos]

    def list_head(self) -> tuple[int, int]:
        """(element count, element type) of a list or set."""
        head = self.byte()
        n = head >> 4 if head >> 4 != 15 else self.varint()
        if n > len(self.buf) - self.pos:
            raise self.error("a list longer than the metadata")
        return n, head & 0x0F


def write_varint(out: bytearray, n: int) -> None:
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def write_zigzag(out: bytearray, n: int) -> None:
    write_varint(out, (n << 1) ^ (n >> 63))
