"""The per-output-dir daemon lock: <dump_root>/.probe/daemon.lock, held with flock."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


def lock_path(dump_root: Path) -> Path:
    return Path(dump_root) / ".probe" / "daemon.lock"


def try_lock(dump_root: Path, attempts: int = 5, pause_s: float = 0.01) -> int | None:
    """Takes the lock and returns its fd (kept open for as long as it is held),
    or None if someone else holds it. A few quick retries ride over a shim that
    only tests the lock for an instant."""
    path = lock_path(dump_root)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o640)
    for i in range(attempts):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if i + 1 < attempts:
                time.sleep(pause_s)
    os.close(fd)
    return None
