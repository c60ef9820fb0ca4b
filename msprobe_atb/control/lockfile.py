"""The per-output-dir daemon lock: <dump_root>/.probe/daemon.lock, held with flock."""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

from msprobe_atb.control.probefiles import open_probe_file, same_file

LOCK_NAME = "daemon.lock"
log = logging.getLogger("msprobe_atb")


def lock_path(dump_root: Path) -> Path:
    return Path(dump_root) / ".probe" / LOCK_NAME


def try_lock(dump_root: Path, attempts: int = 5, pause_s: float = 0.01) -> int | None:
    """Takes the lock and returns its fd (kept open for as long as it is held),
    or None if someone else holds it. A few quick retries ride over a shim that
    only tests the lock for an instant. A link planted at daemon.lock is
    replaced by a fresh file (never followed); after taking the lock, its name
    must still be our file, else someone replaced it meanwhile and we retry."""
    for i in range(attempts):
        fd, replaced = open_probe_file(dump_root, LOCK_NAME, os.O_RDWR | os.O_CREAT)
        if replaced:
            log.warning("%s was a link or not a regular file; replaced it with a fresh lock "
                        "file (never followed)", lock_path(dump_root))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if i + 1 < attempts:
                time.sleep(pause_s)
            continue
        if same_file(fd, dump_root, LOCK_NAME):
            return fd
        os.close(fd)
    return None
