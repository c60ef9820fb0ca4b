"""What a dump lost, and whether its derived files hold its record logs, for `stats`.

The record logs (`.probe/records`) are the ground truth: every selected tensor
has a record there (written, linked, stub, statistics only, or lost), or is
counted per round in its process's exit record (`unrecorded`: no room for its own
record). The round markers carry the same counts once the control plane has
written them. When `.probe/built.json` says the derived files do not hold every
record (not built yet, or a full disk kept them out), the logs are tallied here,
so `stats` says what it cannot see instead of reporting less as everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_atb.control.liveness import is_alive
from msprobe_atb.tree import progress
from msprobe_atb.tree.records import LogTailer, list_logs

from .layout import DumpLayout

MARKER = "ROUND_COMPLETE.json"


@dataclass
class LogTally:
    """The record logs' own counts."""

    tensors: int = 0  # tensor records
    lost: int = 0  # of them `lost`, plus the exit records' `unrecorded`
    rounds: set[tuple[str, str]] = field(default_factory=set)
    bad_lines: int = 0
    unclosed: int = 0  # logs of finished processes without an exit record: counts short
    running: int = 0  # logs of live processes: their losses so far are in their slots only


@dataclass
class Losses:
    lost: int = 0  # per the round markers: selected tensors not written
    without_row: int = 0  # of them, with no row of their own (their record found no room)
    behind: str = ""  # why the derived files do not hold every record ("" if they do)
    logs: LogTally | None = None  # the record logs' counts, when `behind`


def _round_of(path: str) -> tuple[str, str] | None:
    parts = [x for x in path.split("/") if x]
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def tally_logs(dump_root: Path) -> LogTally:
    out = LogTally()
    for key, path in list_logs(dump_root):
        tailer = LogTailer(path)
        closed = False
        while recs := tailer.read_new():
            for rec in recs:
                closed = closed or rec.get("k") == "exit"
                if rec.get("k") == "tensor":
                    out.tensors += 1
                    out.lost += rec.get("file") == "lost"
                    rnd = _round_of(str(rec.get("path", "")))
                    if rnd:
                        out.rounds.add(rnd)
                elif rec.get("k") == "exit" and isinstance(rec.get("unrecorded"), dict):
                    for key, n in rec["unrecorded"].items():
                        if isinstance(n, int) and n > 0:
                            out.lost += n
                            rnd = _round_of(str(key))
                            if rnd:
                                out.rounds.add(rnd)
        out.bad_lines += tailer.bad_lines
        if not closed:
            alive = is_alive(key.pid, key.start_ns)
            out.running += alive
            out.unclosed += not alive
    return out


def _marker_counts(layout: DumpLayout) -> tuple[int, int]:
    lost = without_row = 0
    for rd in layout.rounds:
        try:
            m = json.loads((rd.path / MARKER).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(m, dict):
            lost += m["lost"] if isinstance(m.get("lost"), int) else 0
            n = m.get("lost_without_row")
            without_row += n if isinstance(n, int) else 0
    return lost, without_row


def _behind(dump_root: Path) -> str:
    if not list_logs(dump_root):
        return ""  # no record logs: msProbe's dump, or one copied without .probe
    built = progress.read(dump_root)
    if built and built.unwritten:
        return progress.unwritten_text(built.unwritten)
    unbuilt = progress.unbuilt(dump_root, built)
    if unbuilt:
        return (f"{len(unbuilt)} record log(s) hold records not yet in statistic.csv and the "
                "round markers (the control plane is still at work, or could not record "
                "its progress: `msprobe-atb wait` or `msprobe-atb rebuild`)")
    return ""


def dump_losses(layout: DumpLayout) -> Losses:
    """The losses of a dump under an `atb_dump_data` root (nothing otherwise)."""
    if layout.root is None:
        return Losses()
    lost, without_row = _marker_counts(layout)
    behind = _behind(layout.root)
    return Losses(lost, without_row, behind, tally_logs(layout.root) if behind else None)
