"""A round's directory `data/{dev}_{pid}/{exec}` and its derived files: the
statistic.csv / statistic_extra.csv pair, written anew or appended to, and
ROUND_COMPLETE.json, its commit. The directory is opened once (one component at a
time, never through a link) and kept open while the round is, so appending a
flush's rows costs no path walk; a directory removed meanwhile (`rm -rf data`) is
noticed (no link left to it) and made again."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import EXTRA_HEADER, HEADER
from msprobe_atb.tree.records import RoundKey

STAT = "statistic.csv"
EXTRA = "statistic_extra.csv"
MARKER = "ROUND_COMPLETE.json"
# fdatasync of the rounds a flush completes, side by side: each waits for the
# disk, not the CPU (the GIL is let go meanwhile)
_SYNCERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="sync")
# One CSV record: cells outside quotes hold no line break (csvfmt quotes them).
_CSV_RECORD = re.compile(rb'(?:[^"\n]|"[^"]*")*\n')


def _seq_of(extra_row: bytes) -> int:
    """The Sequence of a statistic_extra.csv row (0 without one, as the records sort)."""
    cell = extra_row.split(b",", 1)[0]
    return int(cell) if cell.lstrip(b"-").isdigit() else 0


class RoundDir:
    def __init__(self, dump_root: Path, key: RoundKey):
        self.dump_root = dump_root
        self.rel = ("data", key[0], key[1])
        self._fd: int | None = None

    def fd(self) -> int:
        """The open directory, made (again) if needed."""
        if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
            self.close()  # removed since it was opened
        if self._fd is None:
            self._fd = fsio.open_dir(self.dump_root, self.rel, create=True)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def name(self, file: str) -> str:
        return "/".join((*self.rel, file))

    def write_pair(self, stat: bytes, extra: bytes) -> None:
        """Both CSVs anew, as a unit."""
        fsio.write_files_at(self.fd(), [(STAT, stat), (EXTRA, extra)])

    def append_pair(self, stat: bytes, extra: bytes) -> None:
        """Rows after those in the files, statistic_extra.csv first (msProbe's
        tools read statistic.csv alone), as a unit."""
        fsio.append_files_at(self.fd(), [(EXTRA, extra), (STAT, stat)])

    def merge_pair(self, stat: bytes, extra: bytes) -> None:
        """Rows that arrived after rows of a higher seq were appended, put in
        sequence order: the pair rewritten with the rows of both, sorted by the
        Sequence column of statistic_extra.csv (stable: the earlier rows first
        among equals)."""
        old = zip(_CSV_RECORD.findall(self.read(STAT) or b"")[1:],
                  _CSV_RECORD.findall(self.read(EXTRA) or b"")[1:])
        pairs = [*old, *zip(_CSV_RECORD.findall(stat), _CSV_RECORD.findall(extra))]
        pairs.sort(key=lambda pair: _seq_of(pair[1]))
        self.write_pair((HEADER + "\n").encode() + b"".join(p[0] for p in pairs),
                        (EXTRA_HEADER + "\n").encode() + b"".join(p[1] for p in pairs))

    def last_seq(self) -> int:
        """The Sequence of the last row (-1: no row, or none readable)."""
        tail = self.read(EXTRA, tail=64 << 10) or b""
        rows = _CSV_RECORD.findall(tail)
        if not rows or (len(rows) == 1 and tail.startswith(b"Sequence")):
            return -1
        return _seq_of(rows[-1])

    def read(self, file: str, tail: int | None = None) -> bytes | None:
        return fsio.read_at(self.fd(), file, tail)

    def write_marker(self, data: bytes) -> None:
        fsio.write_files_at(self.fd(), [(MARKER, data)])

    def remove_marker(self) -> None:
        fsio.remove_at(self.fd(), MARKER)


def sync_pairs(dirs: Sequence[RoundDir]) -> list[BaseException | None]:
    """fdatasync of each round's pair, side by side; per round, None or what failed."""
    def sync(d: RoundDir) -> BaseException | None:
        try:
            fsio.sync_files_at(d.fd(), [STAT, EXTRA])
            return None
        except (OSError, fsio.UnsafePath) as exc:
            return exc

    if len(dirs) > 1:
        try:
            return list(_SYNCERS.map(sync, dirs))
        except RuntimeError:
            pass  # the interpreter is shutting down (a dumper's exit hook): one by one
    return [sync(d) for d in dirs]
