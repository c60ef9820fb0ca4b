"""Statistics of a `.bin` payload, for the rows a dump records none for (a
`task: tensor` dump, a round dir without its CSV), computed by the shim's own
code (native/core/mechanisms/stats.c, the `_stats_kernel` extension), so they
mean what a `task: all` dump records, at the shim's speed.

The payload is read in chunks (metrics.chunks) into one buffer reused across
chunks and files: memory stays fixed whatever the tensor size, and no fresh pages
are touched per file (on this project's VMs first-touching a 256 MiB buffer costs
more CPU than computing its statistics). Each chunk's statistics merge into the
tensor's: counts add, max/min combine, the sums are recovered from each chunk's
mean and norm, so mean and norm can differ from a one-pass sum in the last bits.
A file met again (a hard link) is not read again (FileStats).
Complex tensors (the table keeps |z|, the shim the elements) and the dtypes the
shim has no statistics for (packed, string, fp6/fp4, hifloat8, fp8 e8m0) go
through tensorstats.tensor_stats."""

from __future__ import annotations

import math
import os

from ._stats_kernel import ffi, lib
from .binfile import BinFileError, BinHeader, load_payload
from .metrics import Reader, chunks, tensor_file
from .tensorstats import tensor_stats

# aclDataType codes stats.c computes with the table's meaning (not complex64)
KERNEL_DTYPES = frozenset({0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 27, 35, 36})
NOTE_LEN = 160


class _Merged:
    """The statistics of the chunks seen so far, in the table's terms."""

    def __init__(self) -> None:
        self.count = self.nan = self.pinf = self.ninf = self.zero = 0
        self.total = self.sumsq = 0.0
        self.max = self.min = None

    def add(self, s) -> None:
        self.count += s.count
        self.nan, self.pinf, self.ninf = self.nan + s.nan, self.pinf + s.pinf, self.ninf + s.ninf
        self.zero += s.zero
        self.total += s.mean * s.count
        self.sumsq += s.norm * s.norm
        if s.kind == lib.MSP_STATS_INT:
            hi, lo = s.imax, s.imin
        elif s.kind == lib.MSP_STATS_UINT:
            hi, lo = s.umax, s.umin
        elif s.has_minmax:
            hi, lo = s.max, s.min
        else:  # every element of the chunk NaN
            return
        self.max = hi if self.max is None else max(self.max, hi)
        self.min = lo if self.min is None else min(self.min, lo)

    def stats(self) -> dict[str, float | int | None]:
        nan = float("nan")  # no non-NaN element: no max/min, as tensor_stats says it
        return {"count": self.count, "max": nan if self.max is None else self.max,
                "min": nan if self.min is None else self.min,
                "mean": self.total / self.count, "norm": math.sqrt(self.sumsq),
                "nan": self.nan, "pinf": self.pinf, "ninf": self.ninf, "zero": self.zero}


class FileStats:
    """payload_stats with one buffer for every file, and each file's statistics once:
    a dump's hard links to identical tensors (status `linked`) are one file read once."""

    def __init__(self) -> None:
        self.reader = Reader()
        self.bytes_read = 0
        self._seen: dict[tuple[int, ...], dict] = {}

    def stats(self, hdr: BinHeader) -> dict[str, float | int | None]:
        """payload_stats of a resolved header; raises BinFileError."""
        try:
            st = os.stat(hdr.path)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, hdr.data_offset,
                   hdr.length, hdr.dtype)
            if key not in self._seen:
                self._seen[key] = payload_stats(hdr, self.reader)
                self.bytes_read += hdr.length
        except OSError as e:
            raise BinFileError(hdr.path, f"cannot be read: {e.strerror}") from None
        return self._seen[key]


def payload_stats(hdr: BinHeader, reader: Reader) -> dict[str, float | int | None]:
    """tensor_stats' keys for the payload of a resolved header; raises
    BinFileError (a payload that does not fit its dims, a file that shrank)."""
    tf = tensor_file(hdr)
    if hdr.dtype not in KERNEL_DTYPES or tf.numel == 0:
        return tensor_stats(load_payload(hdr))
    merged, s, note = _Merged(), ffi.new("struct msp_stats *"), ffi.new("char[]", NOTE_LEN)
    with open(hdr.path, "rb", buffering=0) as fh:
        for start, stop in chunks(tf.numel):
            raw = reader.read(tf, fh, start, stop)
            if lib.msp_stats_compute(hdr.dtype, ffi.from_buffer(raw), raw.size, s, note,
                                     NOTE_LEN):
                raise BinFileError(hdr.path, ffi.string(note).decode(errors="replace"))
            merged.add(s)
    return merged.stats()
