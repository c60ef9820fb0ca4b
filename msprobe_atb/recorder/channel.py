"""Reading a shim's statistics channel (native/core/mechanisms/recstats.h): the statistics
of the tensors it holds while armed, in shared memory, never on disk."""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass

from msprobe_atb.config.filecheck import FileRefused, open_regular

MAGIC = 0x5354415453524D31
HEADER = struct.Struct("<QIIQQ32x")
ENTRY = struct.Struct("<QQQIIddddQQ")
PATH_OFF = ENTRY.size


def channel_path(pid: int, start_ns: int) -> str:
    return f"/dev/shm/msprobe-atb-{pid}-{start_ns}.stats"


@dataclass(frozen=True)
class StatEntry:
    t_ns: int
    exec: int
    has_minmax: bool
    max: float
    min: float
    mean: float
    norm: float
    nan: int
    inf: int
    path: str

    def stats(self) -> dict:
        return {"max": self.max, "min": self.min, "mean": self.mean, "norm": self.norm,
                "nan": self.nan, "inf": self.inf}


class Channel:
    """One process's channel; read() returns the entries written since the last call."""

    def __init__(self, pid: int, start_ns: int):
        self.path = channel_path(pid, start_ns)
        self.map: mmap.mmap | None = None
        self.next = 0
        self.lost = 0
        self.cap = self.entry = 0

    def _open(self) -> bool:
        try:  # never blocks: /dev/shm is everyone's, a FIFO may sit at the name
            fd = open_regular(self.path, follow=False)
        except (OSError, FileRefused):
            return False
        try:
            size = os.fstat(fd).st_size
            if size < HEADER.size:
                return False
            self.map = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        magic, _version, self.entry, self.cap, _ = HEADER.unpack_from(self.map, 0)
        if magic != MAGIC or self.entry < PATH_OFF or HEADER.size + self.cap * self.entry > size:
            self.map.close()
            self.map = None
            return False
        return True

    def read(self) -> list[StatEntry]:
        if self.map is None and not self._open():
            return []
        m = self.map
        head = HEADER.unpack_from(m, 0)[4]
        if head < self.next:  # the shim re-armed: a fresh channel
            self.next = 0
        if head - self.next > self.cap:
            self.lost += head - self.cap - self.next
            self.next = head - self.cap
        out = []
        for i in range(self.next, head):
            off = HEADER.size + (i % self.cap) * self.entry
            seq, t_ns, ex, _kind, has_mm, mx, mn, mean, norm, nan, inf = ENTRY.unpack_from(m, off)
            raw = m[off + PATH_OFF: off + self.entry]
            if seq != i + 1 or ENTRY.unpack_from(m, off)[0] != i + 1:
                self.lost += 1  # overwritten while we read
                continue
            path = raw.split(b"\0", 1)[0].decode(errors="replace")
            out.append(StatEntry(t_ns, ex, bool(has_mm), mx, mn, mean, norm, nan, inf, path))
        self.next = head
        return out

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
