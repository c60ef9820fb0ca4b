"""Noticing config edits: watchdog events on the config's directory (editors
replace files by rename, so the file itself is not watched), plus a fallback
poll for file systems without events. A change is judged by (mtime, size,
inode) first and by a content hash second, so an untouched file is never
re-parsed and a touched but identical one is not re-applied."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path

from msprobe_atb.config.loader import MAX_CONFIG_BYTES

log = logging.getLogger("msprobe_atb")
SETTLE_S = 0.02  # editors write in bursts: wait for a quiet moment before reading
SETTLE_MAX_S = 0.3
EMPTY_RETRY_S = 0.1
MISSING = object()


class ConfigWatcher:
    def __init__(self, path: Path, poll_s: float, use_events: bool, wake: threading.Event):
        self.path = Path(path)
        self.poll_s = poll_s
        self.use_events = use_events
        self.wake = wake
        self._changed = threading.Event()
        self._observer = None
        self._next_poll = 0.0
        self._stat: tuple[int, int, int] | None = None
        self._hash: bytes | None = None
        self._known = False  # whether _hash describes the last state we reported
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
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError as exc:
            log.warning("watchdog is not available (%s); config edits are noticed by the "
                        "%.1f s poll only", exc, self.poll_s)
            self.use_events = False
            return
        target = os.path.normpath(str(self.path))
        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:
                paths = [getattr(event, "src_path", ""), getattr(event, "dest_path", "")]
                if any(os.path.normpath(os.fsdecode(p)) == target for p in paths if p):
                    watcher._changed.set()
                    watcher.wake.set()

        try:
            observer = Observer()
            observer.daemon = True
            observer.schedule(Handler(), str(parent), recursive=False)
            observer.start()
        except Exception as exc:  # inotify limits, unsupported file systems, ...
            log.warning("cannot watch %s for changes (%s); using the %.1f s poll only",
                        parent, exc, self.poll_s)
            self.use_events = False
            return
        self._observer = observer
        self._changed.set()  # an edit between the first read and now must not be missed
        log.info("watching %s for changes (events, plus a %.1f s poll)", parent, self.poll_s)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None

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
        """Returns the new content (bytes), MISSING if the file is gone, or None
        if nothing changed since the last call."""
        self._changed.clear()
        self._next_poll = time.monotonic() + self.poll_s
        if self._events_tried and self._observer is None and self.use_events:
            self.start_events()  # the directory may have appeared since
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return self._report(None, None)
        except OSError as exc:
            log.warning("cannot stat %s: %s", self.path, exc)
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if self._known and key == self._stat:
            return None
        try:
            data = self._read()
            if not data.strip():
                # Most likely truncated by a writer that has not written yet
                # (`echo > config.json`): look again before calling it an error.
                time.sleep(EMPTY_RETRY_S)
                data = self._read()
                st = os.stat(self.path)
                key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            return self._report(None, None)
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc)
            return None
        return self._report(key, data)

    def _read(self) -> bytes:
        with open(self.path, "rb") as f:
            return f.read(MAX_CONFIG_BYTES + 1)  # the loader refuses anything longer

    def _report(self, key: tuple[int, int, int] | None, data: bytes | None) -> object | None:
        digest = None if data is None else hashlib.sha256(data).digest()
        changed = not self._known or digest != self._hash
        self._stat, self._hash, self._known = key, digest, True
        if not changed:
            return None
        return MISSING if data is None else data
