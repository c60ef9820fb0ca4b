"""`replay --all` on worker processes (`-j`, one per core by default): the ops of a
layer are independent, and a hidden-4096 layer is tens of CPU s of matmuls (float64
references, float32 magnitudes) and softmaxes, one op after another on one core
otherwise.

Each worker is a fresh process (spawn: forking a process whose polars and OpenBLAS
thread pools have run is not safe) that opens the same dump, with the same round
filter, and replays the ops it is handed by their key; only verdicts come back. A
worker's OpenBLAS runs one thread, so `jobs` workers keep `jobs` cores busy without
oversubscribing them. The largest ops go first, so the workers finish together; the
results keep the ops' order. Each worker replays one op at a time: an op's peak
memory is what it is in-process. Below PARALLEL_MIN_BYTES of tensors the workers'
start-up (imports, opening the dump: ~1 s) would cost more than they save.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from msprobe_atb.tree.names import os_path

from .allocator import keep_freed_arrays
from .dumpops import DumpedOp
from .runner import OpResult, Replayer

PARALLEL_MIN_BYTES = 64 << 20


class WorkerDied(RuntimeError):
    """A worker process ended before handing back its op (killed, out of memory, or the
    dump could not be opened there)."""
_WORKER: Replayer | None = None


def _open(path: str, rounds: str | None) -> None:
    """A worker's initializer: its own Replayer of the dump."""
    global _WORKER
    keep_freed_arrays()
    from ..read.table import filter_tensors, open_dump
    dump = open_dump(path)
    if rounds is not None:
        dump.tensors = filter_tensors(dump.tensors, round=rounds)
    _WORKER = Replayer(dump)


def _replay(key: tuple[str, int, str]) -> tuple[str, str, list[dict], dict | None]:
    assert _WORKER is not None
    r = _WORKER.replay(_WORKER.by_id[key])
    return r.verdict, r.why, r.outputs, r.bad_input


def _size(op: DumpedOp) -> int:
    total = 0
    for t in op.inputs + op.outputs:
        try:
            total += os.stat(os_path(t.path)).st_size if t.path else 0
        except OSError:
            pass
    return total


def replay_ops(rep: Replayer, ops: list[DumpedOp], jobs: int, path: str, rounds: str | None,
               done: Callable[[], None]) -> list[OpResult]:
    """rep.replay of each op, in the order of `ops`; on `jobs` worker processes that
    open `path` (with `rounds`) when there is enough work, else here."""
    sizes = [_size(o) for o in ops]
    if jobs <= 1 or len(ops) < 2 or sum(sizes) < PARALLEL_MIN_BYTES:
        out = []
        for o in ops:
            out.append(rep.replay(o))
            done()
        return out
    results: list[OpResult | None] = [None] * len(ops)
    import multiprocessing
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # read by each worker's numpy at import
    try:
        with ProcessPoolExecutor(min(jobs, len(ops)), multiprocessing.get_context("spawn"),
                                 initializer=_open, initargs=(path, rounds)) as pool:
            order = sorted(range(len(ops)), key=lambda i: -sizes[i])
            futures = {pool.submit(_replay, (ops[i].dev_pid, ops[i].round, ops[i].op_id)): i
                       for i in order}
            for f in as_completed(futures):
                i = futures[f]
                try:
                    results[i] = OpResult(ops[i], *f.result())
                except BrokenProcessPool:
                    raise WorkerDied(f"a worker process ended while replaying {ops[i].path} "
                                     "(killed, out of memory, or it could not open the dump); "
                                     "-j 1 replays in this process") from None
                done()
    finally:
        if saved is None:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved
    return [r for r in results if r is not None]
