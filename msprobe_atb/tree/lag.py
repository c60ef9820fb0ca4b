"""How far the derived files are behind the record logs, for `status`, `wait`,
`stats` and `report`: per record log, the records not yet in statistic.csv,
info/ and the round markers, and how long ago the oldest of them was written.

`.probe/built.json` (progress.py) says per log the bytes, and the records (lines)
in them, that the derived files hold. What lies past a log's built offset is
counted, not guessed, wherever that is cheap: a backlog that fits in one read
of WINDOW bytes has its lines counted; a longer one is the process's slot
`records` (lines the shim appended) minus the records built. Where neither can
be had (the slot was reused or no control block is at hand, or built.json is an
older version's, without `records`), the count is estimated from the backlog's
bytes over the mean size of the records in that first read, and marked so. The
oldest record's age is now minus its `t`: the one line after the offset is read,
never the backlog (a log may be gigabytes). Nothing is written.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_atb.tree.progress import Progress
from msprobe_atb.tree.records import CHUNK, list_logs, log_name

WINDOW = 64 << 10  # read past a log's built offset: its first record, a sample of sizes
FIRST_LINE_MAX = CHUNK  # a first record longer than this (a big graph) gets no age


@dataclass(frozen=True)
class LogLag:
    """One record log's records that the derived files do not hold yet."""

    log: str  # the log's file name, <pid>-<start_ns>.jsonl
    pid: int
    records: int | None  # None: not even estimated (no whole line within FIRST_LINE_MAX)
    estimated: bool  # `records` is bytes over a mean record size, not a count
    bytes: int  # of the log past its built offset
    oldest_t_ns: int | None  # `t` of the first of them; None if its line is unreadable

    def view(self, now_ns: int) -> dict[str, Any]:
        return {"log": self.log, "pid": self.pid, "records": self.records,
                "estimated": self.estimated, "bytes": self.bytes,
                "uncounted_bytes": self.bytes if self.records is None else 0,
                "oldest_t_ns": self.oldest_t_ns, "oldest_s_ago": _ago(self.oldest_t_ns, now_ns)}


def _ago(t_ns: int | None, now_ns: int) -> float | None:
    # a clock ahead of ours (a dump copied from another host) is no negative age
    return None if t_ns is None else round(max(0, now_ns - t_ns) / 1e9, 1)


def appended_of(slots: Iterable[Any]) -> dict[str, int]:
    """{record log name: lines its process appended} from control-block slots."""
    return {log_name(s.pid, s.start_ns): s.records for s in slots}


def appended_in_block(dump_root: Path) -> dict[str, int]:
    """appended_of the dump's control block; {} where it cannot be opened (none, another
    version's, not ours to map): the counts are then estimated."""
    from msprobe_atb.control.block import ControlBlock
    from msprobe_atb.control.ext import ControlError

    try:
        with ControlBlock(dump_root, create=False) as block:
            return appended_of(block.procs())
    except (ControlError, OSError):
        return {}


def _first_t(line: bytes) -> int | None:
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    t = rec.get("t") if isinstance(rec, dict) else None
    return t if isinstance(t, int) and not isinstance(t, bool) else None


def _head(path: Path, offset: int) -> tuple[int, bytes] | None:
    """(the log's size, what follows `offset` up to that size: WINDOW bytes, or up to
    FIRST_LINE_MAX while no line ends); None if it cannot be read or nothing follows."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= offset:
            return None
        f.seek(offset)
        head = f.read(min(WINDOW, size - offset))
        if b"\n" not in head:
            head += f.read(min(FIRST_LINE_MAX, size - offset) - len(head))
    # bytes appended since the fstat are left for the next look, so the counts agree
    return size, head[: size - offset]


def _log_lag(pid: int, path: Path, offset: int, built_records: int | None,
             appended: int | None) -> LogLag | None:
    """`built_records`: the records in the first `offset` bytes (None: not known);
    `appended`: the lines the process appended (None: no slot)."""
    got = _head(path, offset)
    if got is None:
        return None
    size, head = got
    lines = head.count(b"\n")
    backlog = size - offset
    if not lines:
        if len(head) == backlog:
            return None  # only a last line without its newline: not a record yet
        return LogLag(path.name, pid, None, False, backlog, None)
    first_t = _first_t(head[: head.index(b"\n")])
    if len(head) == backlog:
        return LogLag(path.name, pid, lines, False, backlog, first_t)
    if appended is not None and built_records is not None:
        # the lines seen are a floor: the control plane's own exit record of a
        # killed process is in the log but not in the shim's count
        return LogLag(path.name, pid, max(lines, appended - built_records), False, backlog,
                      first_t)
    mean = (head.rindex(b"\n") + 1) / lines
    return LogLag(path.name, pid, round(backlog / mean), True, backlog, first_t)


@dataclass(frozen=True)
class Lag:
    """The record logs that hold records the derived files do not, at `now_ns`."""

    logs: list[LogLag]
    now_ns: int

    def view(self) -> dict[str, Any] | None:
        """The JSON form (None when nothing is behind), which the texts below read."""
        if not self.logs:
            return None
        logs = [x.view(self.now_ns) for x in self.logs]
        known = [x["oldest_t_ns"] for x in logs if x["oldest_t_ns"] is not None]
        oldest = min(known) if known else None
        return {"records": sum(x["records"] or 0 for x in logs),
                "estimated": any(x["estimated"] for x in logs),
                "uncounted_bytes": sum(x["uncounted_bytes"] for x in logs),
                "oldest_t_ns": oldest, "oldest_s_ago": _ago(oldest, self.now_ns),
                "logs": logs}


def measure(dump_root: Path, built: Progress | None,
            appended: Mapping[str, int] | None = None, now_ns: int | None = None) -> Lag:
    """The lag of every record log against `built` (built.json as read, None if there
    is none); `appended`: appended_of the control block's slots, where at hand."""
    offsets = built.offsets if built else {}
    counted = built.records if built else {}
    out = []
    for key, path in list_logs(dump_root):
        name = path.name
        # a log built.json does not name has nothing built; one it names without
        # `records` (an older version) has an unknown count built
        built_records = counted.get(name, None if name in offsets else 0)
        lag = _log_lag(key.pid, path, offsets.get(name, 0), built_records,
                       (appended or {}).get(name))
        if lag is not None:
            out.append(lag)
    return Lag(out, time.time_ns() if now_ns is None else now_ns)


def records_built(built: Progress | None) -> int | None:
    """The records the derived files hold, over every log; None where built.json does
    not count them (none read, or an older version's)."""
    if built is None or (built.offsets and not built.records):
        return None
    return sum(built.records.values())


def duration_text(seconds: float) -> str:
    """12.5 -> "12 s", 300 -> "5 min", 9000 -> "2.5 h"."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _amount(v: dict[str, Any]) -> str:
    """"61,901 records", "about 61,900 records (estimated from the logs' sizes)",
    "3,145,728 bytes of records"."""
    parts = []
    if v["records"] or not v["uncounted_bytes"]:
        n = v["records"] or 0
        parts.append(f"{'about ' if v['estimated'] else ''}{n:,} record{'' if n == 1 else 's'}")
    if v["uncounted_bytes"]:
        parts.append(f"{v['uncounted_bytes']:,} bytes of records")
    return " and ".join(parts)


def _oldest(v: dict[str, Any]) -> str:
    ago = v["oldest_s_ago"]
    return ("the oldest written at an unknown time (its line is unreadable)" if ago is None
            else f"the oldest {duration_text(ago)} ago")


ESTIMATED = " (estimated from the record logs' sizes)"


def behind_text(v: dict[str, Any]) -> str:
    """Lag.view in words: "statistic.csv 61,901 records behind in 2 record logs, the
    oldest 12 s ago"."""
    n = len(v["logs"])
    return (f"statistic.csv {_amount(v)} behind{f' in {n} record logs' if n > 1 else ''}"
            f"{ESTIMATED if v['estimated'] else ''}, {_oldest(v)}")


def per_log_lines(v: dict[str, Any]) -> list[str]:
    """Where more than one log is behind, one line each: "pid 4242: 30,000 records,
    the oldest 12 s ago"."""
    logs = v["logs"]
    if len(logs) < 2:
        return []
    return [f"pid {x['pid']}: {_amount(x)}{' (estimated)' if x['estimated'] else ''}, "
            f"{_oldest(x)}" for x in logs]
