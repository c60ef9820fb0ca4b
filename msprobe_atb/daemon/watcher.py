"""Noticing config edits: watchdog events on the config's directory (editors
replace files by rename, so the file itself is not watched), plus a fallback
poll for file systems without events. A change is judged by (mtime, ctime, size,
inode, mode, owner) first and by a content hash second, so an untouched file is never
re-parsed and a touched but identical one is not re-applied."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from msprobe_atb.config.filecheck import FileRefused, open_config
from msprobe_atb.config.loader import MAX_CONFIG_BYTES
from msprobe_atb.tree.progress import refused_unread, stat_key

log = logging.getLogger("msprobe_atb")
SETTLE_S = 0.02  # editors write in bursts: wait for a quiet moment before reading
SETTLE_MAX_S = 0.3
EMPTY_RETRY_S = 0.1
# File systems with coarse timestamps (NFS, older kernels: a tick or a second) give
# two quick same-size edits the same mtime: a file modified this close to our last
# read is read again, and the hash tells whether it changed (as git's "racy" check).
RACY_NS = 2_000_000_000
MISSING = object()
KEEP = " (the previous config stays in force)"


@dataclass(frozen=True)
class Unusable:
    """The config path exists but is no file to read (a directory, a FIFO, a
    symlink, a file others may write, ...)."""

    problem: str


class ConfigWatcher:
    def __init__(self, path: Path, poll_s: float, use_events: bool, wake: threading.Event):
        self.path = Path(path)
        self.poll_s = poll_s
        self.use_events = use_events
        self.wake = wake
        self._changed = threading.Event()
        # An event names this file: read it whatever (mtime, size, inode) say, since
        # a same-size edit within the file system's timestamp granularity keeps all three.
        self._evented = False
        self._observer = None
        self._next_poll = 0.0
        self._stat: tuple[int, ...] | None = None
        self._hash: bytes | None = None
        self._known = False  # whether _hash describes the last state we reported
        self._token: str | None = None  # that state for `wait` (progress.config_tokens)
        self._read_ns = 0  # wall clock of the read that _hash describes
        self._events_tried = False

    # ---- events ----
    def start_events(self) -> None:
        """Starts watchdog on the config's directory; the poll covers any failure."""
        self._events_tried = True
        if not self.use_events or self._observer is not None:
            return
        parent = self.path.parent
        if not parent.is_dir():
            return  # retried at the next poll: the directory may appear later
        try:
            from watchdog import events
            from watchdog.observers import Observer
        except ImportError as exc:
            log.warning("watchdog is not available (%s); config edits are noticed by the "
                        "%.1f s poll only", exc, self.poll_s)
            self.use_events = False
            return
        target = os.path.normpath(str(self.path))
        watcher = self

        class Handler(events.FileSystemEventHandler):
            def on_any_event(self, event) -> None:
                paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
                if any(os.path.normpath(os.fsdecode(p)) == target for p in paths if p):
                    watcher._evented = True
                    watcher._changed.set()
                    watcher.wake.set()

        try:
            observer = Observer()
            observer.daemon = True
            # what an edit does to a path; not opens and reads: the daemon opens its
            # dump dir thousands of times a second when that is where the config is
            # (each event woke a thread that took the GIL from the daemon's work)
            edits = [events.FileCreatedEvent, events.FileModifiedEvent, events.FileAttribEvent,
                     events.FileClosedEvent, events.FileMovedEvent, events.FileDeletedEvent,
                     events.DirCreatedEvent, events.DirModifiedEvent, events.DirMovedEvent,
                     events.DirDeletedEvent]
            observer.schedule(Handler(), str(parent), recursive=False, event_filter=edits)
            observer.start()
        except Exception as exc:  # inotify limits, unsupported file systems, ...
            log.warning("cannot watch %s for changes (%s); using the %.1f s poll only",
                        parent, exc, self.poll_s)
            self.use_events = False
            return
        self._observer = observer
        # an edit between the first read and now must not be missed
        self._evented = True
        self._changed.set()
        log.info("watching %s for changes (events, plus a %.1f s poll)", parent, self.poll_s)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None

    @property
    def digest(self) -> str | None:
        """The config last handled (applied or refused) as progress.config_tokens names
        it: the hex SHA-256 of its content, or of a file refused unread its stat; None
        while the file is missing (`msprobe-atb wait` compares it with the file)."""
        return self._token if self._known else None

    # ---- checks ----
    def due(self, now: float) -> bool:
        return self._changed.is_set() or now >= self._next_poll

    def settle(self) -> None:
        """After an event, waits until the writer has been quiet for SETTLE_S."""
        deadline = time.monotonic() + SETTLE_MAX_S
        while self._changed.is_set() and time.monotonic() < deadline:
            self._changed.clear()
            time.sleep(SETTLE_S)

    def check(self) -> object | None:
        """Returns the new content (bytes), MISSING if the file is gone, Unusable
        if it is no regular file, or None if nothing changed since the last call."""
        evented, self._evented = self._evented, False
        self._changed.clear()
        self._next_poll = time.monotonic() + self.poll_s
        if self._events_tried and self._observer is None and self.use_events:
            self.start_events()  # the directory may have appeared since
        try:
            st = self._lstat()
        except FileNotFoundError:
            return self._report(None, None)
        except OSError as exc:  # a permission, ...
            return self._unusable(None, Unusable(f"cannot be read: {exc.strerror or exc}"))
        key = stat_key(st)
        if (not evented and self._known and key == self._stat
                and st.st_mtime_ns < self._read_ns - RACY_NS):
            return None
        try:
            data = self._read()
            if not isinstance(data, Unusable) and not data.strip():
                # Most likely truncated by a writer that has not written yet
                # (`echo > config.json`): look again before calling it an error.
                time.sleep(EMPTY_RETRY_S)
                data = self._read()
                key = stat_key(os.lstat(self.path))
        except FileNotFoundError:
            return self._report(None, None)
        except OSError as exc:
            data = Unusable(f"cannot be read: {exc.strerror or exc}")
        if isinstance(data, Unusable):
            return self._unusable(key, data)
        return self._report(key, data)

    def _lstat(self) -> os.stat_result:
        """lstat (a symlink is refused, and judged by itself), looking twice before
        calling the file gone: `rm` + `cp`, and tools that delete before they write,
        leave a moment with no file, and an asleep published for it would stop a dump
        the user never meant to stop."""
        try:
            return os.lstat(self.path)
        except FileNotFoundError:
            time.sleep(EMPTY_RETRY_S)
            return os.lstat(self.path)

    def _unusable(self, key: tuple[int, ...] | None, what: Unusable) -> object | None:
        return self._report(key, what.problem.encode(), what)

    def _read(self) -> bytes | Unusable:
        try:
            fd = open_config(self.path)
        except FileRefused as exc:
            return Unusable(exc.problem + KEEP)
        with os.fdopen(fd, "rb") as f:
            return f.read(MAX_CONFIG_BYTES + 1)  # the loader refuses anything longer

    def _report(self, key: tuple[int, ...] | None, data: bytes | None,
                unusable: Unusable | None = None) -> object | None:
        digest = None if data is None else hashlib.sha256(data).digest()
        if unusable is not None:
            digest = b"unusable:" + digest  # never equal to a file's content hash
        changed = not self._known or digest != self._hash
        self._stat, self._hash, self._known = key, digest, True
        self._token = (None if data is None else refused_unread(key) if unusable is not None
                       else digest.hex())
        self._read_ns = time.time_ns()
        if not changed:
            return None
        if unusable is not None:
            return unusable
        return MISSING if data is None else data
