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
from functools import partial
from pathlib import Path

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import EXTRA_HEADER, HEADER
from msprobe_atb.tree.records import RoundKey

STAT = "statistic.csv"
EXTRA = "statistic_extra.csv"
MARKER = "ROUND_COMPLETE.json"
# the syncs of the rounds a flush completes, side by side (_side_by_side)
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
        # its own entry and those above it on disk (commit_markers), since it was opened
        self.entry_durable = False

    def fd(self) -> int:
        """The open directory, made (again) if needed."""
        if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
            self.close()  # removed since it was opened
        if self._fd is None:
            self._fd = fsio.open_dir(self.dump_root, self.rel, create=True)
            self.entry_durable = False
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

    def remove_marker(self) -> None:
        """The round no longer committed, durably: after a machine crash its old
        marker must not stand beside the rows appended since."""
        if fsio.remove_at(self.fd(), MARKER):
            os.fsync(self.fd())


def _side_by_side(work, items: Sequence) -> list[BaseException | None]:
    """work(item) for each item on the sync threads, side by side (each waits for
    the disk, not the CPU: the GIL is let go meanwhile); per item, None or the
    OSError / UnsafePath it raised."""
    def run(item) -> BaseException | None:
        try:
            work(item)
            return None
        except (OSError, fsio.UnsafePath) as exc:
            return exc

    if len(items) > 1:
        try:
            return list(_SYNCERS.map(run, items))
        except RuntimeError:
            pass  # the interpreter is shutting down (a dumper's exit hook): one by one
    return [run(item) for item in items]


def sync_pairs(dirs: Sequence[RoundDir]) -> list[BaseException | None]:
    """fdatasync of each round's pair, side by side; per round, None or what failed."""
    return _side_by_side(lambda d: fsio.sync_files_at(d.fd(), [STAT, EXTRA]), dirs)


def commit_markers(markers: Sequence[tuple[RoundDir, bytes]]) -> list[BaseException | None]:
    """The rounds' commits, each its ROUND_COMPLETE.json, durable (their pairs
    synced before, sync_pairs): the temporaries written and fsync'd side by side,
    renamed, then the directories fsync'd side by side, each once: every round's
    (the marker's entry, the pair's beside it) and, for a round directory new to
    its RoundDir, those above it up to the dump root (its own entry). Per round,
    None or what failed: its marker is then not in place, or not known to be on disk."""
    temps: dict[int, str] = {}

    def stage(i: int) -> None:
        d, data = markers[i]
        temps[i] = fsio.staged(d.fd(), MARKER, data, durable=True)

    failed = _side_by_side(stage, range(len(markers)))
    needs: dict[tuple[str, ...], list[int]] = {}  # directory -> the rounds it commits
    for i, (d, _) in enumerate(markers):
        if failed[i] is None:
            try:
                fsio.rename_staged(d.fd(), temps[i], MARKER)
            except (OSError, fsio.UnsafePath) as exc:
                failed[i] = exc
                continue
            for n in range(len(d.rel), len(d.rel) - 1 if d.entry_durable else -1, -1):
                needs.setdefault(d.rel[:n], []).append(i)
    if needs:
        root = markers[0][0].dump_root
        rels = list(needs)
        for rel, exc in zip(rels, _side_by_side(partial(fsio.sync_dir, root), rels)):
            for i in needs[rel]:
                failed[i] = failed[i] or exc
    for (d, _), exc in zip(markers, failed):
        d.entry_durable = d.entry_durable or exc is None
    return failed


def commit_rounds(rounds: Sequence[tuple[RoundDir, bytes, bool]]
                  ) -> list[tuple[BaseException | None, BaseException | None]]:
    """Each round (its directory, its marker, whether its pair is synced already)
    committed: its pair synced if it is not, then its marker (commit_markers).
    Per round, (what the sync met, what the marker met): (None, None) committed;
    a failed sync leaves the marker unwritten, (exc, exc)."""
    to_sync = [i for i, (_, _, synced) in enumerate(rounds) if not synced]
    failed: list[BaseException | None] = [None] * len(rounds)
    for i, exc in zip(to_sync, sync_pairs([rounds[i][0] for i in to_sync])):
        failed[i] = exc
    ready = [i for i in range(len(rounds)) if failed[i] is None]
    out = [(exc, exc) for exc in failed]
    for i, exc in zip(ready, commit_markers([rounds[i][:2] for i in ready])):
        out[i] = (None, exc)
    return out
