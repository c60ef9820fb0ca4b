"""The rounds the tree builder holds in memory, and its processes' rows in the
ingest kernel: which rows may go (a process said a round has all its records, had
none in flight, or ended; or its rows take too much memory), when a round is
complete, and letting a complete round go (tree/evicted.py) and taking it back.

`HeldRounds` is the base of TreeBuilder (tree/builder.py): the records fed to
it fill it, the builder's flush writes what it lets go.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from msprobe_atb.tree.evicted import EvictedRounds
from msprobe_atb.tree.ingest import Ingest, RoundInfo, Taken, key_bytes
from msprobe_atb.tree.names import raw_bytes
from msprobe_atb.tree.procinfo import ProcInfo
from msprobe_atb.tree.records import ProcKey, RoundKey
from msprobe_atb.tree.rounddir import MARKER, RoundDir

log = logging.getLogger("msprobe_atb")

# Rows all processes together may hold in the kernel before the biggest holders'
# are let out of order: a round that never ends and never has a moment with
# nothing in flight would otherwise hold all of its rows in memory.
HELD_BYTES = 64 << 20
END = 1 << 62  # a log offset past every record


class ProcOracle(Protocol):
    """What the builder needs to know about the processes beyond their records."""

    def alive(self, key: ProcKey) -> bool: ...

    def settled(self, key: ProcKey, fed: int) -> bool:
        """True if every tensor the process had selected has its record (or
        never will) in the first `fed` bytes of its record log."""
        ...

    def quiet_at(self, key: ProcKey) -> int | None:
        """A size its record log had when no tensor of the process was between
        its selection and its record (every lower seq was in the log), or None."""
        ...

    def watermark_at(self, key: ProcKey) -> tuple[int, int] | None:
        """(S, W): every row of a seq below W is in the first S bytes of its log."""
        ...

    def asleep(self) -> bool: ...


@dataclass
class Round:
    key: RoundKey
    dir: RoundDir
    count: int = 0  # rows in its files
    lost: int = 0
    unlisted: int = 0  # of `lost`: tensors without a row (no record of their own)
    params_lost: int = 0  # op_param.json files not written
    cut: str | None = None  # why its execution was let go of before its end (a `cut` record)
    last_t: int = 0
    last_seq: int = -1  # the highest seq in its files (-1: not known, read back)
    procs: set[ProcKey] = field(default_factory=set)
    # processes whose shim said the round has all its records (a `round` record)
    said_done: set[ProcKey] = field(default_factory=set)
    on_disk: bool = False  # its CSVs are this builder's: rows are appended to them
    synced: bool = True  # no row appended since its files were last synced
    committing: bool = False  # its marker is the committer's to write (committer.py)
    dirty: bool = True  # changed since the last flush
    flushed_once: bool = False
    marker: bytes | None = None  # the marker on disk, as we wrote it
    # rows taken from the kernel that a failed write (a full disk) left to write
    pending: list[Taken] = field(default_factory=list)


@dataclass
class Proc:
    key: ProcKey
    ingest: Ingest
    info: ProcInfo
    output_root: str | None = None
    exited: bool = False
    fed: int = 0  # bytes of its record log fed to the builder
    lines: int = 0  # lines in them
    last_round: RoundKey | None = None  # of its record with the highest seq
    held_said: bool = False  # rows were let out of order for memory (logged once)
    cuts: dict[str, str] = field(default_factory=dict)  # round -> why it was cut


class HeldRounds:
    """The rounds not complete (or shared by processes) and the processes, with
    their rows in the kernel: which may go, and when a round is complete."""

    def __init__(self, dump_root: Path, oracle: ProcOracle):
        self.dump_root = Path(dump_root)
        self.oracle = oracle
        self.rounds: dict[RoundKey, Round] = {}  # rounds not complete, or shared
        self.evicted = EvictedRounds()  # complete rounds let go of (on disk only)
        self.procs: dict[ProcKey, Proc] = {}
        self._error_counts: dict[str, int] = {}
        # rounds the shims said are complete since the last flush: the daemon
        # flushes at once, so that their markers follow however far it is behind
        self.said_done = 0

    # ---- problems are logged, a few times per kind, never raised ----
    def _problem(self, kind: str, message: str) -> None:
        n = self._error_counts.get(kind, 0) + 1
        self._error_counts[kind] = n
        if n <= 5:
            log.warning("%s%s", message, " (further ones of this kind are not logged)"
                        if n == 5 else "")

    def proc(self, key: ProcKey) -> Proc:
        p = self.procs.get(key)
        if p is None:
            p = self.procs[key] = Proc(key, Ingest(key.start_ns), ProcInfo(key.pid))
            p.ingest.set_root(raw_bytes(self._output_root(p).rstrip("/")))
        return p

    def _output_root(self, p: Proc) -> str:
        return p.output_root or str(self.dump_root.parent)

    def _round(self, key: RoundKey) -> Round:
        """The round, read back from its marker if it was let go of."""
        rnd = self.rounds.get(key)
        if rnd is None:
            rnd = self.rounds[key] = Round(key, RoundDir(self.dump_root, key))
            owner = self.evicted.take(key)
            if owner is not None:
                self._restore(rnd, owner)
        return rnd

    def _restore(self, rnd: Round, owner: ProcKey) -> None:
        """Takes back a round it let go of: its counts from its marker; its rows
        stay in its files, and new ones are appended."""
        rnd.procs.add(owner)
        rnd.dirty, rnd.flushed_once, rnd.on_disk = False, True, True
        marker = rnd.dir.read(MARKER)
        try:
            fields = json.loads(marker or b"")
            rnd.count, rnd.lost = fields["rows"], fields["lost"]
            rnd.unlisted = fields.get("lost_without_row", 0)
            rnd.params_lost = fields.get("params_lost", 0)
            rnd.cut = fields.get("cut")
            done = fields.get("complete_at")
            rnd.last_t = round(_dt.datetime.fromisoformat(done.replace("Z", "+00:00"))
                               .timestamp() * 1e3) * 1_000_000 if done else 0
            rnd.marker = marker
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._problem("reload", f"cannot read back {rnd.dir.name(MARKER)} ({exc}); "
                          "its counts restart from 0 until `msprobe-atb rebuild`")
        # the seq of its last row: a row that sorts before it is merged into place
        rnd.last_seq = rnd.dir.last_seq()

    def _sync(self, p: Proc) -> list[RoundInfo]:
        """What the kernel read since the last look: per round, its tensors (a
        later request reusing the round reopens it), the shim's word that it
        has all its records, lost params; the process's last round and device."""
        infos = p.ingest.rounds()
        for info in infos:
            if info.tensors or info.params_lost or info.held:
                rnd = self._round(info.key)
            elif info.key in self.rounds:
                rnd = self.rounds[info.key]
            else:
                continue  # the shim's word on a round already complete
            rnd.procs.add(p.key)
            if info.tensors:
                rnd.said_done.discard(p.key)
                rnd.dirty = True
            if info.said:
                rnd.said_done.add(p.key)
                self.said_done += 1
            if info.params_lost:
                rnd.params_lost += info.params_lost
                rnd.dirty = True
            rnd.last_t = max(rnd.last_t, info.max_t)
        state = p.ingest.state()
        p.last_round = state.last_round
        p.info.learn_device(state.dev)
        return infos

    def _release(self, p: Proc) -> None:
        """Lets the rows go that may be appended: every row of a process whose exit
        record was read, and, once the log is read that far, the rows below a log
        size at which it had nothing in flight (any later tensor has a higher seq),
        and the rows below its writer-head watermark once the log is read to where
        the watermark holds."""
        if p.exited:
            p.ingest.release(END)
            return
        # below that size: every record of a lower seq than any still to come, once
        # read (a dead process gets its exit record once its log is read)
        quiet = self.oracle.quiet_at(p.key)
        if quiet is not None and p.fed >= quiet:
            p.ingest.release(quiet)
        # while tensors are in flight: below the writer-head watermark
        mark = self.oracle.watermark_at(p.key)
        if mark is not None and p.fed >= mark[0]:
            p.ingest.release_seq(mark[1])

    def _release_for_memory(self) -> None:
        """Over HELD_BYTES of rows waiting in all processes (not released: the
        released ones go in this flush), the biggest holders let all their rows go
        (their order then rests on the late-row merge)."""
        held = sorted(((p.ingest.state().waiting_bytes, p.key) for p in self.procs.values()),
                      reverse=True)
        total = sum(n for n, _ in held)
        for n, key in held:
            if total <= HELD_BYTES:
                return
            p = self.procs[key]
            if not p.held_said:
                p.held_said = True
                log.warning("pid %d: its rows and other processes' take over %d MiB waiting "
                            "for the end of their rounds; appending its rows now (a row that "
                            "arrives later is merged into place)", key.pid, HELD_BYTES >> 20)
            p.ingest.release(END)
            total -= n

    def _proc_done_with(self, key: ProcKey, rnd: Round) -> bool:
        p = self.procs.get(key)
        if p is not None and p.ingest.held(key_bytes(rnd.key)):
            return False  # rows of it still to come
        if p is None or p.exited or key in rnd.said_done:
            return True
        if not self.oracle.alive(key):
            # once its log is read: behind a dead process's log, part of a round
            # may have gone out (HELD_BYTES), the rest still unread
            quiet = self.oracle.quiet_at(key)
            return quiet is not None and p.fed >= quiet
        return (self.oracle.settled(key, p.fed)
                and (p.last_round != rnd.key or self.oracle.asleep()))

    def _let_go(self, rounds: list[Round]) -> None:
        """Lets go of the rounds of one process whose marker is written: done,
        they keep memory bounded on long runs."""
        for rnd in rounds:
            if rnd.marker is not None and len(rnd.procs) == 1:
                if self.evicted.add(rnd.key, next(iter(rnd.procs))):
                    del self.rounds[rnd.key]
                    rnd.dir.close()

    def built(self, key: ProcKey) -> tuple[int, int]:
        """(bytes, lines) of the process's log whose records are in the derived
        files: up to the first record of a row still held."""
        p = self.procs[key]
        state = p.ingest.state()
        return (state.min_offset, state.min_line) if state.min_offset >= 0 else (p.fed, p.lines)

    def held_rows(self) -> int:
        return sum(p.ingest.state().held_rows for p in self.procs.values())

    def last_seqs(self) -> dict[ProcKey, int]:
        """The highest seq read of each process (-1: none yet)."""
        return {key: p.ingest.state().last_seq for key, p in self.procs.items()}

    def held_bytes(self) -> int:
        """Memory the rows not yet written take in the kernel."""
        return sum(p.ingest.state().held_bytes for p in self.procs.values())

    def round_count(self) -> int:
        """Rounds built, those let go of included."""
        return len(self.rounds) + len(self.evicted)

    def pending_markers(self) -> int:
        return sum(1 for r in self.rounds.values() if r.marker is None)
