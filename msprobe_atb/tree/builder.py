"""The derived dump tree, built from the record logs.

The daemon feeds the logs' lines as they arrive and flushes periodically;
`rebuild` feeds every log at once and flushes once. Both go through this one
class, and every output depends only on the records (their order within each
process's log) and on whether each process is still running, so the two agree
byte for byte once the processes are gone.

The files only grow: the ingest kernel (tree/ingest.py) turns each process's
tensor records into rows and holds a round's rows until they may be appended
in sequence order (the process said the round has all its records, or had none
in flight, or ended); a flush appends them to statistic.csv and
statistic_extra.csv and hands their manifest lines to the manifest. A round's
ROUND_COMPLETE.json is its commit, written last, once its files are synced. A
round this builder has not written yet (an earlier daemon's, or none) is written
anew at its first flush, so a restarted daemon and `rebuild` replace whatever a
crash left.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import (
    EXTRA_HEADER,
    HEADER,
    extra_row,
    parse_tensor_path,
    statistic_row,
)
from msprobe_atb.tree.evicted import EvictedRounds
from msprobe_atb.tree.incidents import IncidentBook
from msprobe_atb.tree.info import dumps
from msprobe_atb.tree.ingest import (
    Ingest,
    IngestMemoryError,
    RoundInfo,
    Taken,
    key_bytes,
    manifest_cells,
)
from msprobe_atb.tree.manifest import COLUMN_NAMES, ManifestWriter, record_row
from msprobe_atb.tree.procinfo import ProcInfo
from msprobe_atb.tree.records import ProcKey, RoundKey, iso_time, record_int
from msprobe_atb.tree.rounddir import MARKER, STAT, RoundDir, commit_markers, sync_pairs

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


def _named_round(key: object) -> RoundKey | None:
    """The round an exit record's `unrecorded` key names ("" names none)."""
    parts = [x for x in str(key).split("/") if x]
    return (parts[0], parts[1]) if len(parts) == 2 else None


@dataclass
class Round:
    key: RoundKey
    dir: RoundDir
    count: int = 0  # rows in its files
    lost: int = 0
    unlisted: int = 0  # of `lost`: tensors without a row (no record of their own)
    params_lost: int = 0  # op_param.json files not written
    last_t: int = 0
    last_seq: int = -1  # the highest seq in its files (-1: not known, read back)
    procs: set[ProcKey] = field(default_factory=set)
    # processes whose shim said the round has all its records (a `round` record)
    said_done: set[ProcKey] = field(default_factory=set)
    on_disk: bool = False  # its CSVs are this builder's: rows are appended to them
    synced: bool = True  # no row appended since its files were last synced
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


# Names that are not UTF-8 come from the record log as surrogate escapes
# (\udcXX, see native/core/mechanisms/jsonw.h); the CSVs hold their raw bytes, so a
# Tensor Path names the file on disk.
def _raise(exc: BaseException | None) -> None:
    """Raises what a round's batched write met, for _round_io to account for."""
    if exc is not None:
        raise exc


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")



class TreeBuilder:
    def __init__(self, dump_root: Path, oracle: ProcOracle):
        self.dump_root = Path(dump_root)
        self.oracle = oracle
        self.rounds: dict[RoundKey, Round] = {}  # rounds not complete, or shared
        self.evicted = EvictedRounds()  # complete rounds let go of (on disk only)
        self.procs: dict[ProcKey, Proc] = {}
        self._error_counts: dict[str, int] = {}
        self.manifest = ManifestWriter(self.dump_root, "records")
        self.incidents = IncidentBook(self.dump_root)
        self.exits_seen = 0  # exit records fed: the daemon flushes at once after one
        # what the last flush could not write (a full disk): file -> why, and the
        # rows of the rounds whose statistic.csv it is
        self.unwritten: dict[str, str] = {}
        self.unwritten_rows = 0
        self.unwritten_procs: set[ProcKey] = set()  # whose files the last flush missed
        self.progress_error = ""  # `rebuild` could not write .probe/built.json
        # rounds the shims said are complete since the last flush: the daemon
        # flushes at once, so that their markers follow however far it is behind
        self.said_done = 0
        self.late_rows = 0  # rows merged into place after rows of a higher seq
        self._manifest_since: float | None = None  # when the oldest row not in a file came

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
            p.ingest.set_root(_bytes(self._output_root(p).rstrip("/")))
        return p

    # ---- feeding ----
    def feed(self, key: ProcKey, data: bytes, offset: int, line: int, parse) -> int:
        """Reads `data`, whole lines of the process's log from byte `offset` and
        line `line` on; the kernel takes the lines it can, `parse(line)` makes a
        record of each other one (None: none) for the Python path. Returns the
        lines read."""
        p = self.proc(key)
        pos, first = 0, line
        while pos < len(data):
            try:
                taken, lines, stopped = p.ingest.feed(data, pos, offset + pos, line)
            except IngestMemoryError as exc:
                self._problem("memory", f"pid {key.pid}: {exc}; reading its records in Python")
                taken, lines, stopped = 0, 0, True
            line += lines
            pos += taken
            if not stopped:
                break
            end = data.index(b"\n", pos)
            rec = parse(data[pos:end])
            if rec is not None:
                self._add_python(p, rec, offset + pos, line)
            pos, line = end + 1, line + 1
        p.fed = offset + len(data)
        p.lines = line
        return line - first

    def add(self, key: ProcKey, records: list[dict]) -> None:
        """Records that are not in the log (an exit record it had no room for)."""
        p = self.proc(key)
        for rec in records:
            self._add_python(p, rec, p.fed, p.lines)

    def _add_python(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        try:
            self._add_one(p, rec, offset, line)
        except Exception as exc:  # a bad record must never stop the tree
            self._problem("record", f"record log of pid {p.key.pid}: skipped a "
                          f"{rec.get('k')!r} record: {type(exc).__name__}: {exc}")

    def _add_one(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        kind = rec.get("k")
        if kind == "tensor":
            self._add_tensor(p, rec, offset, line)
        elif kind == "param":
            tp = parse_tensor_path(str(rec.get("path", "")))
            if tp:
                p.ingest.param(key_bytes(tp.round_key), record_int(rec.get("seq"), None),
                               record_int(rec.get("t"), 0), rec.get("file") == "lost")
        elif kind == "graph":
            p.info.add_graph(rec, self._problem)
        elif kind == "topo":
            p.info.add_topo(rec, self._problem)
        elif kind == "overflow":
            p.info.add_overflow(rec)
        elif kind == "overflow_output":
            p.info.add_overflow_output(rec)
        elif kind == "attach":
            if isinstance(rec.get("output"), str) and rec["output"]:
                p.output_root = rec["output"]
                p.ingest.set_root(_bytes(rec["output"].rstrip("/")))
        elif kind == "exit":
            p.exited = True
            self.exits_seen += 1
            self._add_unrecorded(p, rec)
        elif kind in ("incident", "incident_tensor", "flush"):
            self.incidents.add_record(p.key, rec)
        elif kind == "round":
            parts = str(rec.get("round", "")).split("/")
            if len(parts) == 2:
                p.ingest.round_said(key_bytes((parts[0], parts[-1])))

    def _add_tensor(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        """A tensor record the kernel left: its rows made here, by the reference."""
        path = rec.get("path")
        tp = parse_tensor_path(path) if isinstance(path, str) else None
        if tp is None:
            self._problem("path", f"pid {p.key.pid}: tensor record with unusable path {path!r}")
            return
        root = self._output_root(p)
        stat = _bytes(statistic_row(rec, tp, root))
        extra = _bytes(extra_row(rec, tp, root))
        man = manifest_cells(dict(zip(COLUMN_NAMES, record_row(rec, tp, p.key.start_ns))))
        if rec.get("file") == "stub" and str(rec.get("note", "")).startswith("hard link refused"):
            self._problem("link-refused", f"pid {p.key.pid}: {path}: {rec['note']} (the file "
                          "system of the dump refuses hard links; msProbe's tools cannot read "
                          "such stubs)")
        p.ingest.add_row(key_bytes(tp.round_key), record_int(rec.get("seq"), None),
                         record_int(rec.get("t"), 0), offset, line, rec.get("file") == "lost", stat,
                         extra, man)

    def _round(self, key: RoundKey) -> Round:
        """The round, read back from its marker if it was let go of."""
        rnd = self.rounds.get(key)
        if rnd is None:
            rnd = self.rounds[key] = Round(key, RoundDir(self.dump_root, key))
            owner = self.evicted.take(key)
            if owner is not None:
                self._restore(rnd, owner)
        return rnd

    def _output_root(self, p: Proc) -> str:
        return p.output_root or str(self.dump_root.parent)

    def _counted_in(self, p: Proc, round_key: RoundKey, rec: dict) -> Round:
        """The round a loss record `rec` of process p counts in, marked as touched."""
        rnd = self._round(round_key)
        rnd.last_t = max(rnd.last_t, record_int(rec.get("t"), 0))
        rnd.procs.add(p.key)
        rnd.dirty = True
        return rnd

    def _add_unrecorded(self, p: Proc, rec: dict) -> None:
        """Selected tensors that never got a record of their own (the record log
        had no room, or the process was killed: its exit record is then the
        daemon's), counted per round; "" is a round the shim could not name. And
        op_param.json files not written whose record found no room (in no round:
        counted in the process's last one)."""
        self._sync(p)  # the process's last round, from what was read before this record
        unrecorded = rec.get("unrecorded")
        if not isinstance(unrecorded, dict):
            unrecorded = {}
        params = record_int(rec.get("params_unrecorded"), 0)
        if params > 0:  # their rounds are not known: the process's last one
            named = [k for k in map(_named_round, unrecorded) if k]
            round_key = p.last_round or (named[-1] if named else None)
            if round_key is None:
                self._problem("params", f"pid {p.key.pid}: {params} op_param.json files were "
                              "not written, in rounds its record log does not name")
            else:
                self._counted_in(p, round_key, rec).params_lost += params
        for key, n in unrecorded.items():
            n = record_int(n, 0)
            round_key = _named_round(key) or p.last_round
            if n <= 0 or round_key is None:
                continue
            rnd = self._counted_in(p, round_key, rec)
            rnd.lost += n
            rnd.unlisted += n

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
            done = fields.get("complete_at")
            rnd.last_t = round(_dt.datetime.fromisoformat(done.replace("Z", "+00:00"))
                               .timestamp() * 1e3) * 1_000_000 if done else 0
            rnd.marker = marker
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._problem("reload", f"cannot read back {rnd.dir.name(MARKER)} ({exc}); "
                          "its counts restart from 0 until `msprobe-atb rebuild`")
        # the seq of its last row: a row that sorts before it is merged into place
        rnd.last_seq = rnd.dir.last_seq()

    # ---- output ----
    def _write(self, *files: tuple[tuple[str, ...], bytes], append: bool = False) -> bool:
        """Writes files as a unit (all or none replaced, or appended to); False,
        logged, on failure; a failure of the file system (a full disk, not a
        refused name) is kept in `unwritten`."""
        try:
            if append:
                fsio.append_files(self.dump_root, files)
            else:
                fsio.write_files(self.dump_root, files)
            return True
        except (OSError, fsio.UnsafePath) as exc:
            names = ", ".join("/".join(rel) for rel, _ in files)
            self._problem("write", f"cannot write {names}: {exc}")
            if isinstance(exc, OSError):
                for rel, _ in files:
                    self.unwritten["/".join(rel)] = exc.strerror or str(exc)
            return False

    def unwritten_summary(self) -> dict | None:
        """What the last flush could not write, for `.probe/built.json`: the number
        of files, the rows missing from statistic.csv (and from the manifest), the
        first few names and the first reason; None when everything was written."""
        manifest_rows = self.manifest.unwritten_rows()
        if not self.unwritten and not manifest_rows:
            return None
        names = sorted(self.unwritten)
        reason = self.unwritten[names[0]] if names else self.manifest.last_error
        return {"files": len(names), "csv_rows": self.unwritten_rows,
                "manifest_rows": manifest_rows, "names": names[:5], "reason": reason}

    def _flush_info(self, p: Proc) -> None:
        info = p.info
        want = info.files()
        if not info.written:
            # A previous daemon may have written these under {pid} before the
            # device was known.
            for rel in want:
                if rel[2] != str(p.key.pid) and len(rel) == 4:
                    fsio.remove_file(self.dump_root, (*rel[:2], str(p.key.pid), rel[3]))
        for rel in [r for r in info.written if r not in want]:
            fsio.remove_file(self.dump_root, rel)  # moved: the device became known
            del info.written[rel]
        info.dirty = False
        for rel, data in want.items():
            if info.written.get(rel) != data:
                if self._write((rel, data)):
                    info.written[rel] = data
                else:
                    info.dirty = True  # the next flush tries again
                    self.unwritten_procs.add(p.key)

    def _take(self, rnd: Round) -> None:
        """Takes the round's released rows from its processes' kernels (the
        older process first: rows sort by process start, then seq)."""
        keyb = key_bytes(rnd.key)
        for key in sorted(rnd.procs):
            p = self.procs.get(key)
            base = rnd.count + sum(t.rows for t in rnd.pending)
            taken = p.ingest.take(keyb, base, rnd.last_seq) if p is not None else None
            if taken is not None:
                rnd.pending.append(taken)
                rnd.dirty = True

    def _round_io(self, rnd: Round, what: str, write) -> bool:
        """Runs write() on the round's files; False, logged, on failure; a failure
        of the file system (a full disk, not a refused name) is kept in
        `unwritten`, with the rows the round's statistic.csv misses."""
        try:
            write()
            return True
        except (OSError, fsio.UnsafePath) as exc:
            self._problem("write", f"cannot write {rnd.dir.name(what)}: {exc}")
            if isinstance(exc, OSError):
                self.unwritten[rnd.dir.name(what)] = exc.strerror or str(exc)
                if what == STAT:
                    self.unwritten_rows += sum(t.rows for t in rnd.pending)
            self.unwritten_procs |= rnd.procs
            return False

    def _append(self, rnd: Round) -> bool:
        """Writes the round's taken rows: a new file pair (the round's first write
        by this builder), an append, or for rows that sort before rows already
        there, the pair rewritten in order. False when they stay pending."""
        d, taken = rnd.dir, rnd.pending
        stat = b"".join(t.stat for t in taken)
        extra = b"".join(t.extra for t in taken)
        late = rnd.on_disk and any(t.late for t in taken)
        if late:
            def write() -> None:
                d.merge_pair(stat, extra)
        elif rnd.on_disk:
            def write() -> None:
                d.append_pair(stat, extra)
        else:
            def write() -> None:
                d.write_pair(_bytes(HEADER + "\n") + stat, _bytes(EXTRA_HEADER + "\n") + extra)
        if not self._round_io(rnd, STAT, write):
            return False
        rows = sum(t.rows for t in taken)
        if late:
            self.late_rows += rows
            log.info("%s: %d row(s) arrived after rows of a higher seq; merged into place",
                     "/".join(d.rel), rows)
        for t in taken:
            rnd.count += t.rows
            rnd.lost += t.lost
            rnd.last_seq = max(rnd.last_seq, t.last_seq)
        rnd.pending = []
        rnd.on_disk = True
        rnd.synced = rnd.synced and not rows
        return True

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

    def _marker(self, rnd: Round) -> bytes:
        fields = {"rows": rnd.count, "lost": rnd.lost,
                  "complete_at": iso_time(rnd.last_t) if rnd.last_t else None}
        if rnd.unlisted:
            fields["lost_without_row"] = rnd.unlisted
        if rnd.params_lost:
            fields["params_lost"] = rnd.params_lost
        return dumps(fields)

    def _flush_round(self, rnd: Round) -> bool:
        """Appends the round's released rows; True when the round is complete
        and its marker is to be written (after its files are synced)."""
        self._take(rnd)
        if rnd.pending or not rnd.on_disk:
            if rnd.marker is not None or not rnd.on_disk:
                # reopened (a later request reuses the round number), or its files
                # written anew over an earlier daemon's: not complete while its new
                # rows go in
                rnd.dir.remove_marker()
                rnd.marker = None
            if not self._append(rnd):
                return False
        complete = all(self._proc_done_with(k, rnd) for k in rnd.procs)
        if not complete and (rnd.marker is not None or not rnd.flushed_once):
            # left by a previous daemon, or the round is open again
            rnd.dir.remove_marker()
            rnd.marker = None
        rnd.dirty = False
        rnd.flushed_once = True
        return complete and self._marker(rnd) != rnd.marker

    def _commit(self, rounds: list[Round]) -> None:
        """The markers of rounds now complete, each once its pair is on disk (the
        syncs side by side); a round of one process is then let go of."""
        synced = [r for r in rounds if not r.synced]
        for rnd, failed in zip(synced, sync_pairs([r.dir for r in synced])):
            if failed is None:
                rnd.synced = True
            else:
                self._problem("sync", f"cannot sync {'/'.join(rnd.dir.rel)}: {failed}")
        ready = [r for r in rounds if r.synced]
        markers = [self._marker(r) for r in ready]
        committed = commit_markers([(r.dir, m) for r, m in zip(ready, markers)])
        for rnd, marker, failed in zip(ready, markers, committed):
            if self._round_io(rnd, MARKER, partial(_raise, failed)):
                rnd.marker = marker
        for rnd in rounds:
            if rnd.marker is not None and len(rnd.procs) == 1:
                # done: keep memory bounded on long runs
                if self.evicted.add(rnd.key, next(iter(rnd.procs))):
                    del self.rounds[rnd.key]
                    rnd.dir.close()

    def flush(self, idle: bool = False) -> None:
        """Appends the rows that may go, writes what changed of info/, and the
        markers of the rounds whose processes are done with them; `idle` (no
        record came since the last flush): the manifest's buffered rows too."""
        self.unwritten = {}
        self.unwritten_rows = 0
        self.unwritten_procs = set()
        for p in self.procs.values():
            self._release(p)
        self._release_for_memory()
        for p in self.procs.values():
            self._sync(p)
        for p in self.procs.values():
            if p.info.dirty:
                self._flush_info(p)
        complete = []
        for rnd in list(self.rounds.values()):
            try:
                if self._flush_round(rnd):
                    complete.append(rnd)
            except Exception as exc:  # one round must not stop the others or the daemon
                self._problem("round", f"cannot build round {'/'.join(rnd.key)}: "
                              f"{type(exc).__name__}: {exc} (`msprobe-atb rebuild` retries)")
        self._commit(complete)
        self._flush_manifest(idle)
        self.incidents.flush()
        self.said_done = 0

    def _flush_manifest(self, idle: bool) -> None:
        """The manifest rows of the rows appended, a part of each process's, when
        the manifest says all processes' rows together are worth files, or
        nothing new comes (`idle`): they wait in the kernel's memory, so its
        bound holds however many processes there are."""
        rows = sum(p.ingest.manifest_rows() for p in self.procs.values())
        if not rows:
            self._manifest_since = None
            return
        now = time.monotonic()
        if self._manifest_since is None:
            self._manifest_since = now
        if idle or self.manifest.due(rows, now - self._manifest_since):
            for p in self.procs.values():
                if p.ingest.manifest_rows():
                    self.manifest.write(p.ingest.manifest_frame())
            self._manifest_since = None

    def finish(self) -> None:
        """The last flush of a builder: the manifest's rows all in its files."""
        self.flush(idle=True)

    def round_count(self) -> int:
        """Rounds built, those let go of included."""
        return len(self.rounds) + len(self.evicted)

    def pending_markers(self) -> int:
        return sum(1 for r in self.rounds.values() if r.marker is None)
