"""Session fixtures built once for the whole run, whatever the number of pytest-xdist
workers: the first worker to need one builds it in the run's shared temporary dir,
holding a lock there; the others wait on the lock and take what it built. Without
xdist it is built in the session's own temporary dir.

What is built so is shared by every worker at once: a test that changes it must
change a copy."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def built_once(tmp_path_factory, name: str, make: Callable[[Path], T]) -> T:
    """make(dir) run once for the run in a fresh dir of `name`; what it returned
    (picklable: paths, dicts of them) to every worker that asks."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make(tmp_path_factory.mktemp(name))
    # Each worker's basetemp is a dir of the run's own, which pytest empties per run.
    shared = tmp_path_factory.getbasetemp().parent / "built_once"
    shared.mkdir(exist_ok=True)
    base, value = shared / name, shared / f"{name}.pickle"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if value.exists():
            return pickle.loads(value.read_bytes())
        shutil.rmtree(base, ignore_errors=True)  # what a worker that failed left
        base.mkdir()
        made = make(base)
        value.write_bytes(pickle.dumps(made))
        return made
