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

TreeBuilder is built in three layers, one file each: the records read
(tree/recordfeed.py), the rounds and rows held in memory until they may go
(tree/heldrounds.py), and here the writing at each flush: the rows appended,
info/, the markers committed, the manifest's rows handed over.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from msprobe_atb.tree import fsio
from msprobe_atb.tree.committer import Committer
from msprobe_atb.tree.csvfmt import EXTRA_HEADER, HEADER
from msprobe_atb.tree.heldrounds import Proc, ProcOracle, Round
from msprobe_atb.tree.info import dumps
from msprobe_atb.tree.ingest import key_bytes
from msprobe_atb.tree.manifest import Encoded, ManifestWriter
from msprobe_atb.tree.manifest import preload as manifest_preload
from msprobe_atb.tree.names import raw_bytes
from msprobe_atb.tree.recordfeed import RecordFeed
from msprobe_atb.tree.records import ProcKey, iso_time
from msprobe_atb.tree.rounddir import MARKER, STAT, commit_rounds

log = logging.getLogger("msprobe_atb")
# A write that failed for want of room: a disk (or a quota) that is full.
NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


def _raise(exc: BaseException | None) -> None:
    """Raises what a round's batched write met, for _round_io to account for."""
    if exc is not None:
        raise exc


class TreeBuilder(RecordFeed):
    """The one object the daemon and `rebuild` use: records in (RecordFeed), the
    rounds held (HeldRounds), and here the writing of the files at each flush."""

    def __init__(self, dump_root: Path, oracle: ProcOracle,
                 on_commit: Callable[[], None] | None = None):
        super().__init__(dump_root, oracle)
        self.manifest = ManifestWriter(self.dump_root, "records")
        # what the last flush could not write (a full disk): file -> why, and the
        # rows of the rounds whose statistic.csv it is
        self.unwritten: dict[str, str] = {}
        self.unwritten_rows = 0
        self.unwritten_procs: set[ProcKey] = set()  # whose files the last flush missed
        # the last flush found no room (ENOSPC, EDQUOT): rows read now would only
        # be held in memory, so the readers of the logs wait for a flush that writes
        self.out_of_space = False
        self.progress_error = ""  # `rebuild` could not write .probe/built.json
        self.late_rows = 0  # rows merged into place after rows of a higher seq
        self._manifest_since: float | None = None  # when the oldest row not in a file came
        # the syncs, markers and manifest files, on a thread of their own (committer.py)
        self.committer = Committer(on_done=on_commit)
        # the manifest's rows a failed write left, and why: as of its last write
        self._manifest_unwritten = (0, "")

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
                self.out_of_space |= exc.errno in NO_ROOM
            return False

    def unwritten_summary(self) -> dict | None:
        """What the last flush could not write, for `.probe/built.json`: the number
        of files, the rows missing from statistic.csv (and from the manifest), the
        first few names and the first reason; None when everything was written."""
        manifest_rows, manifest_error = self._manifest_unwritten
        if not self.unwritten and not manifest_rows:
            return None
        names = sorted(self.unwritten)
        reason = self.unwritten[names[0]] if names else manifest_error
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
                self.out_of_space |= exc.errno in NO_ROOM
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
                d.write_pair(raw_bytes(HEADER + "\n") + stat,
                             raw_bytes(EXTRA_HEADER + "\n") + extra)
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

    def _marker(self, rnd: Round) -> bytes:
        fields = {"rows": rnd.count, "lost": rnd.lost,
                  "complete_at": iso_time(rnd.last_t) if rnd.last_t else None}
        if rnd.unlisted:
            fields["lost_without_row"] = rnd.unlisted
        if rnd.params_lost:
            fields["params_lost"] = rnd.params_lost
        rnd.cut = rnd.cut or next((why for k in sorted(rnd.procs) if k in self.procs
                                   and (why := self.procs[k].cuts.get(rnd.key[1]))), None)
        if rnd.cut:
            fields["cut"] = rnd.cut
        return dumps(fields)

    def _flush_round(self, rnd: Round) -> bool:
        """Appends the round's released rows; True when the round is complete
        and its marker is to be written (after its files are synced)."""
        if rnd.committing:
            return False  # the committer's until its outcome is collected
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
        """Hands the rounds now complete to the committer: each one's marker is
        written once its pair is on disk (the syncs side by side)."""
        if not rounds:
            return
        markers = [self._marker(r) for r in rounds]
        for rnd in rounds:
            rnd.committing = True
        work = [(r.dir, m, r.synced) for r, m in zip(rounds, markers)]
        self.committer.submit(partial(commit_rounds, work),
                              partial(self._committed, rounds, markers))

    def _committed(self, rounds: list[Round], markers: list[bytes], outcome) -> None:
        """A commit's outcome, on the builder's thread; a round of one process
        committed is then let go of. A round not committed is tried again at a
        later flush."""
        for rnd in rounds:
            rnd.committing = False
        if isinstance(outcome, Exception):
            self._problem("sync", f"cannot commit {len(rounds)} round(s): "
                          f"{type(outcome).__name__}: {outcome}")
            return
        for rnd, marker, (sync_failed, marker_failed) in zip(rounds, markers, outcome):
            if sync_failed is not None:
                self._problem("sync", f"cannot sync {'/'.join(rnd.dir.rel)}: {sync_failed}")
                continue
            rnd.synced = True
            if self._round_io(rnd, MARKER, partial(_raise, marker_failed)):
                rnd.marker = marker
        self._let_go(rounds)

    def committing(self) -> set[ProcKey]:
        """The processes of the rounds whose markers the committer is writing."""
        return {k for r in self.rounds.values() if r.committing for k in r.procs}

    def flush(self, idle: bool = False, wait: bool = True) -> None:
        """Appends the rows that may go, writes what changed of info/, and hands
        over the markers of the rounds whose processes are done with them; `idle`
        (no record came since the last flush): the manifest's buffered rows too.
        `wait`: until the markers and the manifest's files are written, else they
        are written beside what comes next (a later flush collects them)."""
        self.unwritten = {}
        self.unwritten_rows = 0
        self.unwritten_procs = set()
        self.out_of_space = False
        self.committer.collect(block=wait)  # `wait`: no round is left to a commit
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
        if wait:
            self.committer.collect(block=True)

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
            manifest_preload()
        if idle or self.manifest.due(rows, now - self._manifest_since):
            for p in self.procs.values():
                if p.ingest.manifest_rows():
                    try:
                        encoded = self.manifest.encode(p.ingest.manifest_frame())
                    except Exception as exc:  # the CSVs go on without these rows' manifest
                        self._manifest_written(exc)
                        continue
                    self.committer.submit(partial(self._write_manifest, encoded),
                                          self._manifest_written,
                                          sum(len(e.data) for e in encoded))
            self._manifest_since = None

    def _write_manifest(self, encoded: list[Encoded]) -> tuple[int, str]:
        """On the committer's thread: the encoded rows into the manifest; what a
        failed write left (ManifestWriter.write never raises for it)."""
        self.manifest.write(encoded)
        return self.manifest.unwritten_rows(), self.manifest.last_error

    def _manifest_written(self, outcome) -> None:
        if isinstance(outcome, Exception):
            self._problem("manifest", f"cannot write the manifest: "
                          f"{type(outcome).__name__}: {outcome}")
        else:
            self._manifest_unwritten = outcome

    def finish(self) -> None:
        """The last flush of a builder: the manifest's rows all in its files."""
        self.flush(idle=True)
