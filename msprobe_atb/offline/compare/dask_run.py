"""The cluster side of pair_engine: a Dask client (a local cluster it starts,
or an existing scheduler), the placement of pairs on workers that can read
them, chunk transfer for pairs no single worker can read, and lost workers.

The task functions at the top run on the workers; only metrics (or chunk
accumulators) come back to the client.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from msprobe_atb.tree.datafile import open_data

from ..dask_roots import announced_roots, can_read
from ..read.binfile import BinFileError, TensorNotSaved
from ..read.metrics import (
    Accumulator,
    Reader,
    TensorFile,
    chunk_accumulator,
    chunks,
    file_metrics,
    mismatch,
    open_tensor,
    pieces,
    resolve_tolerance,
)
from .dask_connect import CONNECT_TIMEOUT_S, ClusterError, reach_scheduler
from .pair_work import EngineReport, Pair, batches, row

# Why pairs were not compared, as the summary says it (EngineReport.lost_why).
RESTART = "killed, crashed or out of memory? restart them and compare again"
DIED = f"the Dask workers running them died each time they were tried: {RESTART}"
BLIND = ("no Dask worker can read their files (no worker's --dump-root holds them): start "
         "one on the node holding them with `dask worker --preload "
         "msprobe_atb.offline.dask_roots --dump-root DIR`")
TRANSFER_WINDOW = 4  # target chunks in flight per worker (bounds the memory they take)
POLL_S = 0.5

# ---- tasks (run on workers) ----

def _me() -> str:
    from distributed import get_worker
    return get_worker().address


def worker_roots() -> list[str] | None:
    """The roots a worker announced. Run first on every worker: it also imports
    this module (and the metric kernel) there, before the first batch needs it."""
    return announced_roots()


def run_batch(pairs: list[Pair], rtol: float | None, atol: float | None) -> tuple[str, list]:
    """Metrics of each pair, and the worker that computed them."""
    return _me(), [row(file_metrics(g, t, d, rtol, atol)) for g, t, d in pairs]


def open_side(path: str) -> TensorFile | tuple[str, str]:
    """The resolved file, or (state, reason) if it cannot be read."""
    try:
        return open_tensor(path)
    except TensorNotSaved as e:
        return "not-saved", str(e)
    except BinFileError as e:
        return "unreadable", str(e)


def read_chunk(t: TensorFile, start: int, stop: int) -> bytes:
    """On the target's worker: the raw payload bytes of elements [start, stop)."""
    with open_data(t.hdr.path, buffering=0) as fh:
        return bytes(Reader().read(t, fh, start, stop))


class _Received(Reader):
    """The target side of a chunk, already read by another worker."""

    def __init__(self, raw: bytes) -> None:
        super().__init__()
        self.raw = np.frombuffer(raw, dtype=np.uint8)

    def read(self, tf, fh, start, stop):  # noqa: ARG002 (the bytes came with the task)
        return self.raw


def chunk_state(g: TensorFile, t: TensorFile, start: int, stop: int, traw: bytes,
                rtol: float, atol: float) -> tuple[str, tuple]:
    """On the golden side's worker: one chunk's accumulator, the target's bytes
    having come through the cluster."""
    with open_data(g.hdr.path, buffering=0) as gfh:
        piece = next(pieces(g, t, gfh, None, (Reader(), _Received(traw)), [(start, stop)]))
    return _me(), chunk_accumulator(piece, rtol, atol).state()


# ---- client side ----

@dataclass
class _Transfer:
    """A pair whose files no single worker can read."""

    index: int
    gw: list[str]
    tw: list[str]
    rtol: float
    atol: float
    sides: dict[str, object] = field(default_factory=dict)
    ranges: list[tuple[int, int]] = field(default_factory=list)
    next: int = 0  # the next chunk to submit
    states: dict[int, tuple] = field(default_factory=dict)
    failed: bool = False


def _local_cluster(jobs: int):
    """`jobs` worker processes, forked from a forkserver that has imported Dask
    and this module (with numpy and the metric kernel) once. Dask's default,
    spawn, imports them afresh in every worker: 3-6 s to ready workers on the
    2-core reference machine, against 1.6-1.8 s (0.2 s for a second cluster in
    the same process, the forkserver being up). No dashboard; the scheduler's
    HTTP endpoint on a free loopback port (its default, 8787, may be taken)."""
    import multiprocessing

    import dask
    from distributed import LocalCluster
    from distributed.utils import get_mp_context

    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        get_mp_context()  # Dask sets its own preload list once: ours replaces it
        multiprocessing.get_context("forkserver").set_forkserver_preload(
            ["distributed", __name__])
        # Workers' shutdown chatter (heartbeats to a closing scheduler) is no news.
        return LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                            host="127.0.0.1", dashboard_address=None,
                            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                            silence_logs=logging.CRITICAL)


class ClusterRun:
    """`with ClusterRun(scheduler, jobs) as run: run.compare(...)`."""

    def __init__(self, scheduler: str | None, jobs: int,
                 connect_timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.scheduler, self.jobs, self.connect_timeout = scheduler, jobs, connect_timeout
        self.cluster = self.client = None

    def __enter__(self) -> ClusterRun:
        from distributed import Client

        if self.scheduler:
            # A scheduler answered there just now (or ClusterError says what did not).
            self.scheduler = reach_scheduler(self.scheduler, self.connect_timeout)
            try:
                self.client = Client(self.scheduler, timeout=self.connect_timeout)
            except (OSError, TimeoutError) as e:
                raise ClusterError(f"cannot reach the Dask scheduler at {self.scheduler} "
                                   f"({e}); start one with `dask scheduler` and workers "
                                   "with `dask worker`, or drop --scheduler to compare "
                                   "on this machine") from None
            self.where = f"Dask cluster {self.scheduler}"
        else:
            self.cluster = _local_cluster(self.jobs)
            self.client = Client(self.cluster)
            self.where = f"local Dask cluster of {self.jobs} worker processes"
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None

    def compare(self, pairs: list[Pair], sizes: list[int], rtol: float | None,
                atol: float | None, out: list, progress: Callable[[int], None] | None
                ) -> EngineReport:
        self.out, self.progress, self.rtol, self.atol = out, progress, rtol, atol
        self.pairs = pairs
        roots = self.client.run(worker_roots)
        if not roots:
            raise ClusterError(f"the Dask cluster {self.scheduler} has no workers; start "
                               "some with `dask worker`")
        self.report = EngineReport(self.where, len(roots))
        self.workers = set(roots)
        self.everywhere = all(r is None for r in roots.values())
        self.tracked: dict = {}  # future -> (kind, payload, workers it needs)
        self.ready: deque[_Transfer] = deque()  # planned transfers with chunks to submit
        self.inflight = 0  # transfer chunks submitted, not yet done
        groups: dict[frozenset, list[int]] = defaultdict(list)
        transfers: list[_Transfer] = []
        for i, (g, t, d) in enumerate(pairs):
            gw = [w for w, r in roots.items() if can_read(r, g)]
            tw = [w for w, r in roots.items() if can_read(r, t)]
            both = frozenset(gw) & frozenset(tw)
            if both:
                groups[both].append(i)
            elif gw and tw:
                transfers.append(_Transfer(i, gw, tw, *resolve_tolerance(d, rtol, atol)))
            else:
                self._not_compared([i], f"no worker of the cluster can read "
                                   f"{t if gw else g}: start one with `--preload "
                                   "msprobe_atb.offline.dask_roots --dump-root DIR` on "
                                   "the node holding it", BLIND)
        for group, idx in groups.items():
            for b in batches(idx, sizes, len(group)):
                self._submit(("batch", b), set(group), run_batch, [pairs[i] for i in b],
                             rtol, atol)
        for tr in transfers:
            g, t, _ = pairs[tr.index]
            self._submit(("open", tr, "g"), set(tr.gw), open_side, g)
            self._submit(("open", tr, "t"), set(tr.tw), open_side, t)
        self._drain()
        return self.report

    def _submit(self, what: tuple, need: set[str], fn, *args, need_also: set | None = None):
        """Submit a task restricted to the workers in `need` (and, through its
        input, `need_also`). When every worker reads every path, it is left
        unrestricted, so a worker that replaces a lost one (a nanny's restart)
        takes it over."""
        if self.everywhere:
            fut = self.client.submit(fn, *args, pure=False)
            self.tracked[fut] = (what, [None])
        else:
            fut = self.client.submit(fn, *args, workers=sorted(need),
                                     allow_other_workers=False, pure=False)
            self.tracked[fut] = (what, [need] + ([need_also] if need_also else []))
        return fut

    def _not_compared(self, idx: list[int], reason: str, why: str) -> None:
        """The pairs `idx` get no metrics: `reason` per pair, `why` (what the
        cluster could not do) for the summary."""
        for i in idx:
            if self.out[i] is None:
                rt, at = resolve_tolerance(self.pairs[i][2], self.rtol, self.atol)
                self.out[i] = {"state": "not-compared", "reason": reason, "rtol": rt,
                               "atol": at}
                self.report.not_compared += 1
                self.report.lost_why[why] = self.report.lost_why.get(why, 0) + 1
                if self.progress:
                    self.progress(1)

    def _drain(self) -> None:
        from distributed import wait

        while self.tracked:
            try:
                done = wait(list(self.tracked), timeout=POLL_S,
                            return_when="FIRST_COMPLETED").done
            except TimeoutError:
                done = set()
            for fut in done:
                what, _ = self.tracked.pop(fut)
                if fut.status == "finished":
                    self._finished(what, fut.result())
                elif fut.status == "error":
                    exc = fut.exception()
                    self._failed(what, f"the task failed on the cluster: {exc!r}",
                                 DIED if type(exc).__name__ == "KilledWorker" else
                                 f"their task failed on the cluster ({type(exc).__name__})")
            live = set(self.client.nthreads())
            for fut, (what, needs) in list(self.tracked.items()):
                if any(not (live if need is None else need & live) for need in needs):
                    self.tracked.pop(fut)
                    fut.cancel()
                    gone = ", ".join(sorted(set().union(*(n or self.workers for n in needs))
                                            - live))
                    self._failed(what, f"not compared: the worker(s) that could read its "
                                       f"files left the cluster ({gone})",
                                 f"the Dask worker(s) able to read their files left the "
                                 f"cluster ({gone}): {RESTART}")

    def _indices(self, what: tuple) -> list[int]:
        return what[1] if what[0] == "batch" else [what[1].index]

    def _failed(self, what: tuple, reason: str, why: str) -> None:
        if what[0] != "batch":
            what[1].failed = True
        if what[0] == "chunk":
            self.inflight -= 1
            self._pump()
        self._not_compared(self._indices(what), reason, why)

    def _finished(self, what: tuple, result) -> None:
        kind = what[0]
        if kind == "batch":
            who, rows = result
            for i, r in zip(what[1], rows):
                self.out[i] = r
                self.report.placement[self.pairs[i][:2]] = who
            if self.progress:
                self.progress(len(rows))
            return
        tr: _Transfer = what[1]
        if kind == "chunk":
            self.inflight -= 1
            self._pump()
        if tr.failed:
            return
        if kind == "open":
            tr.sides[what[2]] = result
            if len(tr.sides) == 2:
                self._plan(tr)
            return
        k, (who, state) = what[2], result
        tr.states[k] = state
        self.report.placement[self.pairs[tr.index][:2]] = who
        self.report.moved_bytes += tr.sides["t"].byte_span(*tr.ranges[k])[1]
        if len(tr.states) == len(tr.ranges):
            total = Accumulator()
            for k in range(len(tr.ranges)):
                total.merge(Accumulator(tr.states[k]))
            self.out[tr.index] = {"state": "ok", **total.metrics(tr.rtol, tr.atol)}
            self.report.moved_pairs += 1
            if self.progress:
                self.progress(1)

    def _plan(self, tr: _Transfer) -> None:
        g, t = tr.sides["g"], tr.sides["t"]
        for side in (g, t):  # the golden side's problem first, as in file_metrics
            if isinstance(side, tuple):
                self._done(tr, {"state": side[0], "reason": side[1]})
                return
        why = mismatch(g, t)
        if why:
            self._done(tr, {"state": "ok", "reason": why})
            return
        tr.ranges = chunks(g.numel)
        self.ready.append(tr)
        self._pump()

    def _pump(self) -> None:
        """Submit chunks of the planned transfers, pair after pair, while fewer than
        TRANSFER_WINDOW per worker are in flight: each is read on the target's
        worker and accumulated on the golden side's."""
        while self.ready and self.inflight < TRANSFER_WINDOW * self.report.workers:
            tr = self.ready[0]
            if tr.failed or tr.next >= len(tr.ranges):
                self.ready.popleft()
                continue
            k, (a, b) = tr.next, tr.ranges[tr.next]
            tr.next += 1
            g, t = tr.sides["g"], tr.sides["t"]
            raw = self._submit(("read", tr, k), set(tr.tw), read_chunk, t, a, b)
            self.tracked.pop(raw)  # followed through the chunk task, which needs it
            self._submit(("chunk", tr, k), set(tr.gw), chunk_state, g, t, a, b, raw,
                         tr.rtol, tr.atol, need_also=set(tr.tw))
            self.inflight += 1

    def _done(self, tr: _Transfer, m: dict) -> None:
        self.out[tr.index] = {"rtol": tr.rtol, "atol": tr.atol, **m}
        if self.progress:
            self.progress(1)


class ClusterStart:
    """A local cluster started in a background thread (`ready` is set once its
    workers have imported the metric code, or the start failed). `result()` waits
    for it; `close()` shuts it down, at once if it is up, else as soon as its
    start completes (the caller does not wait for a cluster it no longer needs)."""

    def __init__(self, jobs: int) -> None:
        self.ready = threading.Event()
        self._run: ClusterRun | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()
        threading.Thread(target=self._start, args=(jobs,), name="local-dask-cluster").start()

    def _start(self, jobs: int) -> None:
        run = ClusterRun(None, jobs)
        try:
            run.__enter__()
            run.client.run(worker_roots)
        except Exception as e:  # handed to the caller by result()
            self._error = e
            run.close()
        else:
            with self._lock:
                closed = self._closed
                if not closed:
                    self._run = run
            if closed:
                run.close()
        self.ready.set()

    def result(self) -> ClusterRun:
        self.ready.wait()
        if self._run is None:
            raise ClusterError(f"the local Dask cluster did not start ({self._error!r}); "
                               "compare with `--engine in-process` instead") from self._error
        return self._run

    def close(self) -> None:
        with self._lock:
            self._closed = True
            run, self._run = self._run, None
        if run is not None:
            run.close()
