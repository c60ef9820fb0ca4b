"""Closing the record log of a process that was killed before its exit drain, or
whose exit record found no room (a disk full from the start).

The shim counts, per round, the selected tensors that have no record yet in its
control-block slot (native/core/mechanisms/pending.h); a SIGKILL, or an exit record that
could not be written, leaves those counts behind. The control plane appends them
to the process's log as the exit record it lacks, so the round markers, `status`
and a later `rebuild` all count the same loss, in the right rounds. Where the
log has no room for it either, the record is fed to the tree as it is (the slot
keeps the counts for a later `rebuild`).
"""

from __future__ import annotations

import json
import logging
import os
import time

from msprobe_atb.control.liveness import is_alive
from msprobe_atb.tree.records import ProcKey

log = logging.getLogger("msprobe_atb")

_COUNTERS = ("ops_seen", "tensors_selected", "tensors_written", "bytes_written", "drops",
             "errors", "overflow_events")


def _append(path: os.PathLike, rec: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        with open(path, "rb") as f:
            f.seek(max(0, size - 1))
            # a line the kill cut short stays one bad line, not glued to ours
            lead = b"\n" if size and f.read(1) != b"\n" else b""
        line = lead + json.dumps(rec, separators=(",", ":")).encode("utf-8", "surrogateescape")
        os.write(fd, line + b"\n")
    finally:
        os.close(fd)


def close_killed(block, builder, drain) -> list[ProcKey]:
    """Writes the exit record of every process in the block that died without
    one, or exited without one (it found no room), once its log is read to the
    end. Returns the processes closed."""
    closed = []
    for slot in block.procs():
        key = ProcKey(slot.pid, slot.start_ns)
        p = builder.procs.get(key)
        tailer = drain.tailers.get(key)
        # the slot is read before the log: an exit record written in between is
        # in the log by the time at_end() looks
        if (p is None or p.exited or tailer is None
                or (not slot.exited and is_alive(slot.pid, slot.start_ns))
                or not tailer.at_end()):
            continue
        unrecorded = block.pending(slot.slot)
        lost = sum(unrecorded.values())
        rec = {"k": "exit", "t": time.time_ns(), "killed": not slot.exited, "drained": False,
               "lost": lost, **{c: getattr(slot, c) for c in _COUNTERS},
               "unrecorded": unrecorded,
               **({"params_unrecorded": slot.params_unrecorded} if slot.params_unrecorded
                  else {})}
        how = ("exited, but its exit record found no room in its record log" if slot.exited
               else "died before its exit drain")
        try:
            _append(tailer.path, rec)
            closed.append(key)
        except OSError as exc:
            log.warning("pid %d %s; cannot close the log %s either (%s): its counts are "
                        "taken from the control block", slot.pid, how, tailer.path, exc)
            builder.add(key, [rec])
        per_round = ", ".join(f"{k or 'round unknown'}: {n}" for k, n in unrecorded.items())
        log.warning("pid %d %s: %d selected tensors have no record%s", slot.pid, how, lost,
                    f" ({per_round})" if per_round else "")
    if closed:
        drain.poll()
    return closed
