"""What a dump lost, and whether its derived files hold its record logs, for `stats`,
`compare`, `report` and `replay`.

The record logs (`.probe/records`) are the ground truth: every selected tensor
has a record there (written, linked, stub, statistics only, or lost), or is
counted per round in its process's exit record (`unrecorded`: no room for its own
record). The round markers carry the same counts once the control plane has
written them. When `.probe/built.json` says the derived files do not hold every
record (not built yet, or a full disk kept them out), the logs are tallied here,
so `stats` says what it cannot see instead of reporting less as everything.
Lost op_param.json files are counted the same way (markers' `params_lost`, or the
logs' lost param records and exit records' `params_unrecorded`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_atb.control.liveness import is_alive, is_daemon
from msprobe_atb.tree import lag, progress
from msprobe_atb.tree.datafile import open_data, read_small
from msprobe_atb.tree.records import CHUNK, RECORD_START, list_logs

from .layout import DumpLayout

MARKER = "ROUND_COMPLETE.json"
# Tensor and exit records as the shim writes them (native/core/mechanisms/tensorrec.c and
# exitdrain.c: one a line, keys in this order); literal prefixes keep the scans fast.
_TENSOR = b'{"k":"tensor",'
_LOST = tuple(b'"task":"%s","file":"lost"' % t for t in (b"tensor", b"statistics", b"all"))
_PATH = re.compile(rb'\{"k":"tensor","t":\d+,"seq":\d+,"path":"/?([^"/\\]+)/([^"/\\]+)/')
# a JSON string holds no bare quote, so "file":"lost" can only be the record's own key
_PARAM_LOST = re.compile(rb'\{"k":"param",[^\n]*?"file":"lost"')
_EXIT = re.compile(rb'\{"k":"exit",[^\n]*')


@dataclass
class LogTally:
    """The record logs' own counts."""

    tensors: int = 0  # tensor records
    lost: int = 0  # of them `lost`, plus the exit records' `unrecorded`
    params_lost: int = 0  # op_param.json files not written (records, exit records)
    rounds: set[tuple[str, str]] = field(default_factory=set)
    bad_lines: int = 0
    unclosed: int = 0  # logs of finished processes without an exit record: counts short
    running: int = 0  # logs of live processes: their losses so far are in their slots only


@dataclass
class Losses:
    lost: int = 0  # per the round markers: selected tensors not written
    without_row: int = 0  # of them, with no row of their own (their record found no room)
    params_lost: int = 0  # per the round markers: op_param.json files not written
    behind: str = ""  # why the derived files do not hold every record ("" if they do)
    logs: LogTally | None = None  # the record logs' counts, when `behind`
    lag: dict | None = None  # the records not built yet, how many and how old (tree/lag.py)


def _round_of(path: str) -> tuple[str, str] | None:
    parts = [x for x in path.split("/") if x]
    return (parts[0], parts[1]) if len(parts) >= 2 else None


def _blobs(path: Path):
    """The log's complete lines, a chunk of them at a time."""
    with open_data(path, follow=False) as f:
        rest = b""
        while chunk := f.read(CHUNK):
            blob = rest + chunk
            end = blob.rfind(b"\n") + 1
            rest = blob[end:]
            yield blob[:end]


def _tally_blob(out: LogTally, blob: bytes) -> bool:
    """Adds a chunk of whole lines; True if it held an exit record."""
    if blob.count(RECORD_START) != blob.count(b"\n"):
        # a record glued to one a full disk cut short: each line's last record
        lines = blob.split(b"\n")[:-1]
        blob = b"\n".join(line[max(0, line.rfind(RECORD_START)):] for line in lines) + b"\n"
    out.tensors += blob.count(_TENSOR)
    out.lost += sum(blob.count(x) for x in _LOST)
    out.params_lost += len(_PARAM_LOST.findall(blob))
    out.rounds.update((a.decode(), b.decode()) for a, b in set(_PATH.findall(blob)))
    exits = _EXIT.findall(blob)
    for line in exits:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            out.bad_lines += 1
            continue
        if not isinstance(rec, dict):
            continue
        params = rec.get("params_unrecorded")
        out.params_lost += params if isinstance(params, int) and params > 0 else 0
        unrecorded = rec.get("unrecorded")
        for key, n in unrecorded.items() if isinstance(unrecorded, dict) else ():
            if isinstance(n, int) and n > 0:
                out.lost += n
                rnd = _round_of(str(key))
                if rnd:
                    out.rounds.add(rnd)
    return bool(exits)


def tally_logs(dump_root: Path) -> LogTally:
    """Counts the logs' tensor records, lost tensors and rounds. Tensor records are
    recognised by how the shim writes them, chunk by chunk (a JSON parse per record
    takes minutes on a long service's logs); exit records are parsed."""
    out = LogTally()
    for key, path in list_logs(dump_root):
        closed = False
        try:
            for blob in _blobs(path):
                closed = _tally_blob(out, blob) or closed
        except OSError:
            out.bad_lines += 1
        if not closed:
            alive = is_alive(key.pid, key.start_ns)
            out.running += alive
            out.unclosed += not alive
    return out


def _marker_counts(layout: DumpLayout) -> tuple[int, int, int]:
    """(lost tensors, of them without a row, lost op_param.json files) per the markers."""
    lost = without_row = params = 0
    for rd in layout.rounds:
        try:
            m = json.loads(read_small(rd.path / MARKER, "a round marker"))
        except (OSError, ValueError):
            continue
        if isinstance(m, dict):
            lost += m["lost"] if isinstance(m.get("lost"), int) else 0
            n = m.get("lost_without_row")
            without_row += n if isinstance(n, int) else 0
            n = m.get("params_lost")
            params += n if isinstance(n, int) else 0
    return lost, without_row, params


def _behind(dump_root: Path) -> tuple[str, bool, dict | None]:
    """(why the derived files do not hold every record, or ""; whether to count the
    logs: not while a live control plane is merely a flush behind; the records not
    built yet, lag.Lag.view)."""
    if not list_logs(dump_root):
        return "", False, None  # no record logs: msProbe's dump, or one copied without .probe
    built = progress.read(dump_root)
    behind = lag.measure(dump_root, built, lag.appended_in_block(dump_root)).view()
    if built and built.unwritten:
        return (progress.unwritten_text(built.unwritten)
                + (f"; and {lag.behind_text(behind)}" if behind else "")), True, behind
    if not behind:
        return "", False, None
    if built and built.daemon_pid and is_daemon(built.daemon_pid):
        return (f"{lag.behind_text(behind)}: the control plane (pid {built.daemon_pid}) is "
                "still adding them (`msprobe-atb wait` waits for it)"), False, behind
    return (f"{lag.behind_text(behind)}, and no control plane is running (`msprobe-atb "
            "wait` or `msprobe-atb rebuild` adds them)"), True, behind


def dump_losses(layout: DumpLayout) -> Losses:
    """The losses of a dump under an `atb_dump_data` root (nothing otherwise)."""
    if layout.root is None:
        return Losses()
    lost, without_row, params = _marker_counts(layout)
    behind, count, lag_view = _behind(layout.root)
    return Losses(lost, without_row, params, behind,
                  tally_logs(layout.root) if count else None, lag_view)


def losses_summary(layout) -> dict:
    """Selected tensors not written, per the round markers or, where the derived
    files are behind the record logs, per the logs (`derived_behind` says why)."""
    losses = dump_losses(layout)
    logs = losses.logs
    return {
        "lost": logs.lost if logs else losses.lost,
        "lost_without_row": losses.without_row,
        "params_lost": logs.params_lost if logs else losses.params_lost,
        "derived_behind": losses.behind,
        "derived_lag": losses.lag,
        "record_logs": {"tensors": logs.tensors, "lost": logs.lost,
                        "params_lost": logs.params_lost, "rounds": len(logs.rounds),
                        "unclosed": logs.unclosed, "running": logs.running,
                        "bad_lines": logs.bad_lines}
        if logs else None,
    }


def format_losses(s: dict, tensors: int) -> list[str]:
    """The lines of losses_summary's `s` for a dump whose tables hold `tensors`."""
    lines = []
    logs = s["record_logs"]
    if s["derived_behind"]:
        lines.append(f"  INCOMPLETE: {s['derived_behind']}")
    if logs:
        lines.append(f"  the record logs hold {logs['tensors']} tensor records in "
                     f"{logs['rounds']} rounds and {logs['lost']} lost tensors; what follows "
                     f"covers only the {tensors} tensors the derived files hold")
        if logs["running"]:
            lines.append(f"  {logs['running']} process(es) still run: the tensors they lost so "
                         "far without a record are counted by `msprobe-atb status` only")
        if logs["unclosed"] or logs["bad_lines"]:
            lines.append(f"  the record logs themselves are short: {logs['unclosed']} end "
                         "without an exit record (the process was killed, or not even that "
                         f"record found room), {logs['bad_lines']} lines are unreadable; "
                         "`msprobe-atb status` has the processes' own counters")
    elif s["lost"]:
        lines.append(f"  LOST: {s['lost']} selected tensors were not written (round markers)"
                     + (f", {s['lost_without_row']} of them without a statistic.csv row: "
                        "their record found no room" if s["lost_without_row"] else ""))
    if s["params_lost"]:
        lines.append(f"  LOST: {s['params_lost']} op_param.json files were not written"
                     f" ({'record logs' if logs else 'round markers'}); `msprobe-atb replay`"
                     " cannot replay their ops")
    return lines
