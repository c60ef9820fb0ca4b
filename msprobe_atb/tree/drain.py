"""Draining the record logs into a TreeBuilder, and what the builder learns
about processes from the control block."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from msprobe_atb.control.block import HEAD_IDLE
from msprobe_atb.control.liveness import is_alive
from msprobe_atb.tree import fsio, progress
from msprobe_atb.tree.builder import TreeBuilder
from msprobe_atb.tree.progress import Progress
from msprobe_atb.tree.records import LogTailer, ProcKey, list_logs, log_path

log = logging.getLogger("msprobe_atb")


class BlockOracle:
    """Process facts from the control block's table (if there is a block) and /proc.

    The daemon refreshes it before it reads the record logs: a queue seen empty
    then had every record of the process in the log, below the size taken just
    after, and those are read by the time the tree is written (settled). A slot
    with no tensor pending (counted from before a tensor takes its seq until its
    record is in the log) had, below that size, every tensor of a lower seq than
    any still to come (quiet_at: its rows may be appended). Pending tensors whose
    record found no room (a full disk) stay counted for good: a slot whose
    pending count and log did not move since the last look, with its queue
    empty, is taken as quiet too.

    Finer, while tensors are in flight: `refresh(last_seqs)`, given the highest
    seq the builder has read of each process (before the heads are read), reads
    the writer heads, then the log's size S: every record of a seq below
    min(smallest head, highest seq read + 1) is below S (docs/contracts.md §3,
    one saving thread), so once S is read those rows may go (watermark_at)."""

    def __init__(self, block=None, dump_root: Path | None = None):
        self.block = block
        self.dump_root = block.dump_root if block is not None else dump_root
        self._slots: dict[ProcKey, object] = {}
        self._idle_at: dict[ProcKey, int] = {}  # queue empty: the log's size then
        self._quiet_at: dict[ProcKey, int] = {}  # nothing pending: the log's size then
        self._seen: dict[ProcKey, tuple[int, int]] = {}  # (pending, log size) at the last look
        self._marks: dict[ProcKey, tuple[int, int]] = {}  # (log size, seq below which all in)
        self._asleep = False
        self._alive: dict[ProcKey, bool] = {}
        self.refresh()

    def refresh(self, last_seqs: dict[ProcKey, int] | None = None) -> None:
        """A new look at the block; `last_seqs`: the highest seq read of each
        process so far (the writer-head watermark needs it from before the heads)."""
        self._alive.clear()
        if self.block is None:
            return
        self._slots = {ProcKey(s.pid, s.start_ns): s for s in self.block.procs()}
        self._idle_at, self._quiet_at, self._marks = {}, {}, {}
        seen, self._seen = self._seen, {}
        for key, slot in self._slots.items():
            try:
                size = os.stat(log_path(self.block.dump_root, key)).st_size
            except OSError:
                size = 0
            if last_seqs is not None and key in last_seqs:
                heads = min(slot.writer_head, default=HEAD_IDLE)
                self._marks[key] = (size, min(heads, last_seqs[key] + 1))
            if slot.queue_depth:
                continue
            pending = sum(self.block.pending(slot.slot).values())
            self._idle_at[key] = size
            self._seen[key] = (pending, size)
            if not pending or seen.get(key) == (pending, size):
                self._quiet_at[key] = size
        self._asleep = self.block.read_config()[1].state == 0

    def alive(self, key: ProcKey) -> bool:
        if key not in self._alive:
            slot = self._slots.get(key)
            exited = slot is not None and slot.exited
            self._alive[key] = not exited and is_alive(key.pid, key.start_ns)
        return self._alive[key]

    def settled(self, key: ProcKey, fed: int) -> bool:
        if key not in self._slots:
            return True  # no slot: nothing of it in flight
        return fed >= self._idle_at.get(key, fed + 1)

    def quiet_at(self, key: ProcKey) -> int | None:
        if key in self._slots:
            return self._quiet_at.get(key)
        try:  # no slot: nothing of it in flight, its log is whole
            return os.stat(log_path(self.dump_root, key)).st_size
        except (OSError, TypeError):
            return None

    def watermark_at(self, key: ProcKey) -> tuple[int, int] | None:
        """(S, W): once the first S bytes of its log are read, every row of a seq
        below W is in; None without a look at its writers."""
        return self._marks.get(key)

    def asleep(self) -> bool:
        return self._asleep


class RecordDrain:
    """Follows every record log of a dump root and feeds new records to the builder."""

    def __init__(self, dump_root: Path, builder: TreeBuilder):
        self.dump_root = Path(dump_root)
        self.builder = builder
        self.tailers: dict[ProcKey, LogTailer] = {}
        self._bad_reported: dict[ProcKey, int] = {}

    def poll(self, budget: int | None = None) -> int:
        """Reads complete new lines, about `budget` bytes of them at most (None:
        all); returns how many bytes were fed."""
        for key, path in list_logs(self.dump_root):
            if key not in self.tailers:
                self.tailers[key] = LogTailer(path)
                self.builder.proc(key)
        fed = 0
        # a chunk of each log in turn: behind a backlog, every process's rows
        # move on together (one log read to its end first would leave the
        # others' rounds unbuilt, and their rows held, for as long)
        reading = list(self.tailers.items())
        while reading and (budget is None or fed < budget):
            still = []
            for key, tailer in reading:
                chunk = tailer.read_chunk()
                if chunk:
                    tailer.advance(chunk, self.builder.feed(key, chunk, tailer.offset,
                                                             tailer.lines, tailer.parse))
                    fed += len(chunk)
                    still.append((key, tailer))
            reading = still
        for key, tailer in self.tailers.items():
            if tailer.bad_lines != self._bad_reported.get(key, 0):
                self._bad_reported[key] = tailer.bad_lines
                log.warning("%s (%d unreadable lines so far in this log)", tailer.last_bad,
                            tailer.bad_lines)
        return fed

    def drained(self) -> bool:
        return all(t.at_end() for t in self.tailers.values())

    def progress(self, daemon_pid: int = 0, config_sha256: str | None = None) -> Progress:
        """What the tree holds after a flush: bytes built per log, finished processes."""
        # finished once the markers and manifest files handed over are written, too
        writing = self.builder.committer.pending()
        finished = [t.path.name for key, t in self.tailers.items() if not writing
                    and (self.builder.proc(key).exited or not self.builder.oracle.alive(key))]
        built = {t.path.name: self.builder.built(key) for key, t in self.tailers.items()}
        return Progress(daemon_pid, config_sha256,
                        {name: offset for name, (offset, _) in built.items()}, finished,
                        self.builder.unwritten_summary(),
                        {name: lines for name, (_, lines) in built.items()})


# `rebuild` reads the logs this many bytes at a time and writes the tree in
# between, as the daemon does behind a backlog: its memory is the daemon's
# whatever the dump's size (read whole, 127 MB of logs took 575 MB of RSS, and a
# 300 s two-device run's logs 14.7 GB, until the disk filled).
REBUILD_READ_BYTES = 16 << 20


def read_through(drain: RecordDrain) -> bool:
    """Reads the logs to their end REBUILD_READ_BYTES at a time, the tree
    written in between; stops early, the rest left in the logs, once a write
    finds the disk full (rows read then would only be held in memory). False
    if it stopped so."""
    while drain.poll(REBUILD_READ_BYTES) >= REBUILD_READ_BYTES:
        drain.builder.flush(wait=False)
        if drain.builder.out_of_space:
            return False
    return True


def rebuild(dump_root: Path, block=None) -> TreeBuilder:
    """Rebuilds every derived file from the record logs. What could not be written
    (a full disk) is in the builder's `unwritten`, built.json included; never raises
    for it."""
    builder = TreeBuilder(dump_root, BlockOracle(block, dump_root))
    drain = RecordDrain(dump_root, builder)
    read_through(drain)
    if block is not None:
        from msprobe_atb.tree.killed import close_killed

        close_killed(block, builder, drain)  # a killed process the daemon did not close
    builder.finish()
    try:
        progress.write(dump_root, drain.progress())
    except (OSError, fsio.UnsafePath) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        builder.progress_error = f"cannot write {progress.path_of(dump_root)}: {why}"
    return builder
