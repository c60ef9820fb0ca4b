"""Reading the per-process record logs (.probe/records/<pid>-<start_ns>.jsonl).

A reader only consumes complete lines: a last line without its newline is a
record still being written (or cut by a crash) and is read again later.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

LOG_NAME = re.compile(r"^([0-9]+)-([0-9]+)\.jsonl$")
CHUNK = 1 << 20  # a read's records are parsed at once: they set the daemon's peak memory
MAX_LINE = 1 << 30
AT_END_PIECE = 64 << 10  # LogTailer.at_end reads this much at a time
RECORD_START = b'{"k":'


def iso_time(t_ns: int) -> str:
    """A record's time (ns since the epoch) as ISO 8601 UTC, to the millisecond."""
    return _dt.datetime.fromtimestamp(t_ns / 1e9, _dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def hex_float(text: str) -> float | None:
    """The double of the shim's exact form of a finite double in a record, a
    hex-float string ("0x1.8p+1", "-0x0p+0", as float.hex writes them); None
    for any other string."""
    if not text[:3].lower().lstrip("-+").startswith("0x"):
        return None
    try:
        return float.fromhex(text)
    except (ValueError, OverflowError):
        return None


def record_int(value: object, default: int | None = -1) -> int | None:
    """An integer field of a record; `default` for anything else (a bool included)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def record_float(value: object) -> float | None:
    """A double of a record: a hex-float string (hex_float), a JSON number (the
    torch dumper, logs of earlier versions), or "nan", "inf", "-inf"; None for
    anything else (a bool included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        exact = hex_float(value)
        if exact is not None:
            return exact
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclass(frozen=True, order=True)
class ProcKey:
    """A process, named as its record log is: (pid, CLOCK_REALTIME at attach)."""

    pid: int
    start_ns: int


# A round of a process's executions: ("{dev}_{pid}", "{exec}"), its dir under data/.
RoundKey = tuple[str, str]


def records_dir(dump_root: Path) -> Path:
    return dump_root / ".probe" / "records"


def log_name(pid: int, start_ns: int) -> str:
    """The record log of process (pid, start_ns), as LOG_NAME reads it back."""
    return f"{pid}-{start_ns}.jsonl"


def log_path(dump_root: Path, key: ProcKey) -> Path:
    return records_dir(dump_root) / log_name(key.pid, key.start_ns)


def list_logs(dump_root: Path) -> list[tuple[ProcKey, Path]]:
    d = records_dir(dump_root)
    try:
        entries = list(os.scandir(d))
    except FileNotFoundError:
        return []
    out = []
    for entry in entries:
        m = LOG_NAME.match(entry.name)
        # only regular files, never followed: opening a FIFO named like a log would
        # hang the reader, a planted link would read a file outside the tree
        if m and entry.is_file(follow_symlinks=False):
            out.append((ProcKey(int(m.group(1)), int(m.group(2))), d / entry.name))
    out.sort()
    return out


class LogTailer:
    """Incremental reader of one record log: whole lines, in chunks."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.lines = 0  # complete lines below offset: the shim counts them (slot `records`)
        self.bad_lines = 0
        self.last_bad: str | None = None

    def read_chunk(self, limit: int | None = None) -> bytes:
        """The whole lines after `offset`, about `limit` bytes of them (a longer
        single line, e.g. a big graph, whole); b"" when no line is complete. A line
        longer than MAX_LINE is no record: it is skipped (counted bad)."""
        try:
            with open(os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
                f.seek(self.offset)
                data = f.read(limit or CHUNK)
                while b"\n" not in data and len(data) < MAX_LINE:
                    more = f.read(CHUNK)
                    if not more:
                        break
                    data += more
        except (FileNotFoundError, IsADirectoryError):
            return b""
        except OSError as exc:  # ELOOP: replaced by a link since it was listed
            self.bad_lines += 1
            self.last_bad = f"{self.path.name}: not read ({exc.strerror})"
            return b""
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= MAX_LINE:  # never a record: skip to the next line
                self.offset += len(data)
                self.lines += 1
                self.bad_lines += 1
                self.last_bad = f"{self.path.name}: a line longer than {MAX_LINE} bytes"
            return b""
        return data[:end + 1]

    def advance(self, chunk: bytes, lines: int | None = None) -> None:
        """`chunk` (from read_chunk, `lines` lines if counted already) was read."""
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n") if lines is None else lines

    def parse(self, line: bytes) -> dict | None:
        """One line (without its newline) as a record; None for a blank or bad
        line (counted, the last one kept in `last_bad`)."""
        if not line.strip():
            return None
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as exc:
            self.bad_lines += 1
            self.last_bad = f"{self.path.name}: unreadable record ({exc}): {line[:120]!r}"
            rec = self._glued(line)
            if rec is None:
                return None
        if not isinstance(rec, dict):
            self.bad_lines += 1
            self.last_bad = f"{self.path.name}: record is not an object: {line[:120]!r}"
            return None
        return rec

    def read_new(self) -> list[dict]:
        """The records of the next chunk, parsed here (readers other than the
        tree builder, which hands most lines to its kernel)."""
        chunk = self.read_chunk()
        self.advance(chunk)
        return [rec for line in chunk.split(b"\n")[:-1] if (rec := self.parse(line)) is not None]

    @staticmethod
    def _glued(line: bytes) -> dict | None:
        """The whole record after a cut one: a write cut short (disk full) leaves
        a line without its newline, and the next record is appended to it. Every
        record starts with `{"k":`, which cannot occur unescaped inside one."""
        start = line.rfind(RECORD_START, 1)
        if start < 0:
            return None
        try:
            rec = json.loads(line[start:])
        except (ValueError, RecursionError):
            return None
        return rec if isinstance(rec, dict) else None

    def at_end(self) -> bool:
        """True when every complete line has been read."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return True
        if size <= self.offset:
            return True
        # piece by piece, up to the first newline: behind a backlog the rest of
        # the log is tens of MB, and the daemon asks every half second
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            left = size - self.offset
            while left > 0:
                piece = f.read(min(left, AT_END_PIECE))
                if not piece:
                    return True
                if b"\n" in piece:
                    return False
                left -= len(piece)
            return True
