"""How far a dump under load has got, read from outside: per record log the
records the shim appended (its slot's `records`) and those already in the
derived files (.probe/built.json `records`), how old the oldest record not yet
built is, the daemon's and the producers' RSS, and what was lost.

bench/stats_pace.py takes one Sample a second."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import rss_kib
from msprobe_atb.control.block import ControlBlock, ControlError
from msprobe_atb.control.liveness import is_alive
from msprobe_atb.tree import progress
from msprobe_atb.tree.records import list_logs

_T = re.compile(rb'"t":(\d+)')


@dataclass
class Sample:
    t: float                                                 # time.monotonic()
    produced: dict[str, int] = field(default_factory=dict)   # log name -> records appended
    built: dict[str, int] = field(default_factory=dict)      # log name -> records built
    age_s: float = 0.0          # the oldest record not yet built: its age (0: none)
    daemon_pid: int = 0
    daemon_rss_kib: int = 0
    host_rss_kib: dict[int, int] = field(default_factory=dict)  # live producer pid -> RSS
    lost: int = 0               # drops + errors of every slot
    queued: int = 0             # selected, no record yet: the shims' own backlog
    queue_bytes: int = 0        # the fullest copy queue: its slot's queue_bytes ...
    queue_items: int = 0        # ... and queue_depth

    @property
    def total_produced(self) -> int:
        return sum(self.produced.values())

    @property
    def total_built(self) -> int:
        return sum(self.built.values())

    @property
    def lag(self) -> int:
        """Records appended to the logs and not yet in the derived files."""
        return max(0, self.total_produced - self.total_built)


def _first_t(log: Path, offset: int) -> int | None:
    """The `t` of the first record at or after `offset` in the log."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            m = _T.search(f.readline())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def last_record_ns(dump_root: Path) -> int:
    """The `t` of the newest record of all logs (their last complete lines)."""
    newest = 0
    for _, log in list_logs(dump_root):
        try:
            with open(log, "rb") as f:
                f.seek(max(0, os.stat(log).st_size - 65536))
                tail = f.read()
        except OSError:
            continue
        complete = tail[:tail.rfind(b"\n") + 1]
        for m in _T.finditer(complete):
            newest = max(newest, int(m.group(1)))
    return newest


def _built_records(built: progress.Progress, name: str, records: int, size: int) -> int:
    """The records of a log in the derived files: built.json's count, or (a
    control plane that writes only byte offsets) the same share of its records
    as of its bytes."""
    if name in built.records:
        return built.records[name]
    offset = built.offsets.get(name, 0)
    return records * min(offset, size) // size if size else 0


def sample(dump_root: Path) -> Sample | None:
    """One look at the dump; None while it has no control block yet."""
    now_ns = time.time_ns()
    s = Sample(time.monotonic())
    try:
        block = ControlBlock(dump_root, create=False)
    except (ControlError, OSError):
        return None
    with block:
        slots = {f"{p.pid}-{p.start_ns}.jsonl": p for p in block.procs()}
        s.daemon_pid = block.daemon_pid
    built = progress.read(dump_root) or progress.Progress()
    oldest = now_ns
    for _, log in list_logs(dump_root):
        slot = slots.get(log.name)
        if slot is None:
            continue
        try:
            size = os.stat(log).st_size
        except OSError:
            continue
        s.produced[log.name] = slot.records
        s.built[log.name] = _built_records(built, log.name, slot.records, size)
        offset = built.offsets.get(log.name, 0)
        if offset < size:
            oldest = min(oldest, _first_t(log, offset) or now_ns)
    s.age_s = (now_ns - oldest) / 1e9
    for slot in slots.values():
        s.lost += slot.drops + slot.errors
        s.queued += max(0, slot.tensors_selected - slot.tensors_written - slot.drops
                        - slot.errors)
        if slot.queue_bytes > s.queue_bytes:
            s.queue_bytes, s.queue_items = slot.queue_bytes, slot.queue_depth
        if not slot.exited and is_alive(slot.pid, slot.start_ns):
            s.host_rss_kib[slot.pid] = rss_kib(slot.pid)
    s.daemon_rss_kib = rss_kib(s.daemon_pid) if s.daemon_pid else 0
    return s
