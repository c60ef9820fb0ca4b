"""The tree's durable writes beside its ingest: one thread of their own runs the
round commits (a pair synced, then its ROUND_COMPLETE.json) and the manifest's
files, in the order they were handed over.

A sync waits for the disk, and while the kernel writes back the machine's dirty
pages (every 30 s by default) one fdatasync took 0.3-1 s here and one flush's
commits 2-3 s: run inline, the ingest stopped that long and the oldest record not
in statistic.csv was 4 s old. Here the rows go on being appended while the
markers wait for the disk.

A job is work() for the thread and apply(outcome) for the builder's own thread,
which runs the applies of finished jobs in order when it collects them: the
builder's state changes on its thread only. outcome is what work() returned, or
the exception it raised; one that is no Exception (SystemExit) ends the thread
and is raised again by the collect that meets it. At most MAX_JOBS wait, holding
at most MAX_BYTES (what each job says it keeps: a manifest part's encoded
bytes, ~15 a row); submit() collects the oldest beyond that, so a disk slower
than the records holds the ingest back instead of memory growing. A writeback
stall of a few seconds fits in them: a flush comes every 0.1 s at most (64 are
6.4 s of them), a manifest part every 2 s. on_done, if given, is called on the
thread after each job: the daemon's loop wakes to collect it at once, so a
process waiting at its exit for its files is told as soon as they are durable,
not at the loop's next 0.1 s poll."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

MAX_JOBS = 64
MAX_BYTES = 16 << 20

Apply = Callable[[Any], None]


class Committer:
    def __init__(self, max_jobs: int = MAX_JOBS, max_bytes: int = MAX_BYTES,
                 on_done: Callable[[], None] | None = None):
        self._max_jobs, self._max_bytes = max_jobs, max_bytes
        self._on_done = on_done
        self._cv = threading.Condition()
        self._todo: deque[tuple[Callable[[], Any], Apply, int]] = deque()
        self._done: deque[tuple[Apply, Any, int]] = deque()
        self._bytes = 0  # kept by the jobs not collected
        self._thread: threading.Thread | None = None

    def pending(self) -> int:
        """Jobs handed over whose apply has not run."""
        with self._cv:
            return len(self._todo) + len(self._done)

    def ready(self) -> bool:
        """A finished job waits to be collected."""
        with self._cv:
            return bool(self._done)

    def submit(self, work: Callable[[], Any], apply: Apply, keeps: int = 0) -> None:
        """`keeps`: the bytes the job holds until it is collected."""
        while self._full(keeps):
            self._collect_one(block=True)
        with self._cv:
            self._bytes += keeps
            self._todo.append((work, apply, keeps))
            self._cv.notify_all()
            if self._thread is None:
                # a daemon thread: an interpreter that exits without the builder's
                # last collect leaves uncommitted rounds, which rebuild commits
                self._thread = threading.Thread(target=self._run, name="msprobe-commit",
                                                daemon=True)
                self._thread.start()

    def _full(self, keeps: int) -> bool:
        with self._cv:
            jobs = len(self._todo) + len(self._done)
            return jobs > 0 and (jobs >= self._max_jobs
                                 or self._bytes + keeps > self._max_bytes)

    def collect(self, block: bool = False) -> None:
        """Runs the applies of the finished jobs, in order; `block`: of every job,
        waiting for those still running."""
        while self._collect_one(block):
            pass

    def _collect_one(self, block: bool) -> bool:
        with self._cv:
            while block and not self._done and self._todo:
                self._cv.wait()
            if not self._done:
                return False
            apply, outcome, keeps = self._done.popleft()
            self._bytes -= keeps
        if not isinstance(outcome, Exception) and isinstance(outcome, BaseException):
            raise outcome  # (SystemExit, a fault test's crash) on the builder's thread
        apply(outcome)
        return True

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._todo:
                    self._cv.wait()
                work, apply, keeps = self._todo[0]
            try:
                outcome = work()
            except BaseException as exc:  # the builder's thread says what failed
                outcome = exc
            with self._cv:
                self._todo.popleft()
                self._done.append((apply, outcome, keeps))
                self._cv.notify_all()
            if self._on_done is not None:
                self._on_done()
            if not isinstance(outcome, Exception) and isinstance(outcome, BaseException):
                return  # the process is going down: nothing more runs here
