"""A running `Dumper` in a forked child (os.fork, multiprocessing's "fork"): the
child dumps as a process of its own, with its own record log, `{dev}_{pid}`
directory and rounds from 0, as the shim's forked child attaches anew
(native/core/lifecycle/forkchild.c); its Dumper closes at the child's exit.

The parent's fork returns only once the child's log exists (the child closes a
pipe the parent reads to its end), so `run --torch`, which waits for the process
of every record log, cannot miss a child its command left running."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import weakref
from typing import Any

_running: weakref.WeakSet[Any] = weakref.WeakSet()  # started Dumpers, not closed yet
_pipes: dict[int, tuple[int, int]] = {}  # forking thread -> (read end, write end)


def track(dumper: Any) -> None:
    _running.add(dumper)


def untrack(dumper: Any) -> None:
    _running.discard(dumper)


def _before() -> None:
    if _running:
        _pipes[threading.get_ident()] = os.pipe()


def _after_in_parent() -> None:
    pipe = _pipes.pop(threading.get_ident(), None)
    if pipe is None:
        return
    os.close(pipe[1])
    try:
        os.read(pipe[0], 1)  # end of file: the child has made its logs (or died)
    finally:
        os.close(pipe[0])


def _after_in_child() -> None:
    mine = _pipes.pop(threading.get_ident(), None)
    for pipe in _pipes.values():  # other threads' forks: held open here, they would wait
        _close(pipe)
    _pipes.clear()
    try:
        for dumper in list(_running):
            if dumper.forked():
                _close_at_exit(dumper)
    finally:
        if mine is not None:
            _close(mine)


def _close(pipe: tuple[int, int]) -> None:
    os.close(pipe[0])
    os.close(pipe[1])


def _close_at_exit(dumper: Any) -> None:
    """atexit, for a child that returns. A multiprocessing child ends in os._exit
    after running the finalizers it registered after clearing its parent's: there
    ours is registered by an after-fork callback, which runs after that clearing."""
    atexit.register(dumper.close)
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:
        mp_util.register_after_fork(dumper, _finalize)


def _finalize(dumper: Any) -> None:
    sys.modules["multiprocessing.util"].Finalize(dumper, dumper.close, exitpriority=0)


os.register_at_fork(before=_before, after_in_parent=_after_in_parent,
                    after_in_child=_after_in_child)
