"""A Dask worker preload for the killed-worker tests: a worker about to open a file
PATH for which PATH.hold is a FIFO first reads that FIFO to its end, so it stays in
a read of the test's choosing until the test writes, closes it, or kills the worker.

(The readers refuse a FIFO in place of a .bin without waiting, as they must: the
test can no longer hold a worker with one there.)"""

from __future__ import annotations

import os
import stat

_open = os.open


def _held_open(path, flags, *args, **kwargs):
    hold = f"{os.fsdecode(path)}.hold"
    try:
        is_fifo = stat.S_ISFIFO(os.stat(hold).st_mode)
    except (OSError, TypeError, ValueError):
        is_fifo = False
    if is_fifo:
        fd = _open(hold, os.O_RDONLY)  # until the test opens its end for writing
        try:
            while os.read(fd, 4096):
                pass
        finally:
            os.close(fd)
    return _open(path, flags, *args, **kwargs)


def dask_setup(worker) -> None:  # noqa: ARG001 (Dask's hook)
    os.open = _held_open
