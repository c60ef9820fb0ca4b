"""Per-pair tensor metrics of a compare, run where the data lies.

dumps.py decides which pairs to compare and turns these metrics into verdicts;
this module only computes them (metrics.file_metrics, or its pieces), by one of
three engines (`compare --engine`, `--scheduler`):
* `local-cluster`: a local Dask cluster of `jobs` worker processes (`-j`, one per
  core by default);
* `in-process`: in the compare process (also what `-j 1` means);
* `auto` (the default): the local cluster, for a compare big enough to hide its
  start-up. The rule: the pairs' in-process time is estimated from their bytes
  and number (engine_rule.py: IN_PROCESS_BYTES_PER_S, IN_PROCESS_PAIRS_PER_S, measured by
  bench/compare_speed.py); below LOCAL_CLUSTER_MIN_S they run in-process, as a
  cluster's start-up (2-3.5 s on a 2-core machine) would cost more than it saves.
  Above, the cluster starts in a background thread while the compare process
  works through the pairs in order; once its workers are up they take the rest.
  So no compare waits for the cluster, and a small one never starts it;
* an existing Dask cluster (`--scheduler tcp://HOST:PORT`).
On a cluster, pairs go in batches (pair_work.py: BATCH_BYTES / BATCH_PAIRS) to
a worker that can read both files (dask_roots.py: each worker announces its dump
roots). A pair whose files no single worker can read is cut into the metric kernel's chunks:
the target's worker reads each chunk, the scheduler moves it to the golden
side's worker, which accumulates it; only the accumulators come back, and the
report counts the bytes that travelled. Chunk accumulators merge in chunk order
on every path, so the metrics are the same bits wherever they were computed.
A task whose worker dies is retried by Dask on another worker that can read its
files (up to distributed's `scheduler.allowed-failures` times); a pair whose
capable workers all left the cluster, or that killed its workers repeatedly, is
reported `not-compared`, never passed.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from ..read.dtypes import DTYPE_CODES, SPECS
from ..read.metrics import file_metrics
from .dask_connect import CONNECT_TIMEOUT_S
from .engine_rule import (
    ENGINES,
    IN_PROCESS_BYTES_PER_S,
    IN_PROCESS_PAIRS_PER_S,
    LOCAL_CLUSTER_MIN_S,
)
from .pair_work import PAIR_METRICS, EngineReport, Pair, row


def _est_bytes(dtype: str, count) -> int:
    spec = SPECS.get(DTYPE_CODES.get(dtype, -2))
    return spec.nbytes(int(count or 0))[-1] if spec else 0


def estimated_seconds(golden_bytes: int, target_bytes: int, pairs: int) -> float:
    """The in-process time of the pairs, at the reference rates."""
    return (golden_bytes + target_bytes) / IN_PROCESS_BYTES_PER_S + \
        pairs / IN_PROCESS_PAIRS_PER_S


def pair_metrics(work: pl.DataFrame, rtol: float | None, atol: float | None, jobs: int,
                 progress: Callable[[int], None] | None, scheduler: str | None = None,
                 engine: str = "auto", connect_timeout: float = CONNECT_TIMEOUT_S
                 ) -> tuple[pl.DataFrame, EngineReport]:
    """Metrics of each row of `work` (columns _i, golden_path, target_path,
    target_dtype, target_count, golden_dtype, golden_count); rtol/atol None mean
    the target dtype's defaults. Returns PAIR_METRICS plus `_i`, in the order of
    `work`, and where it ran. A scheduler must answer within `connect_timeout` s."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: use one of {', '.join(ENGINES)}")
    pairs = [(g, t, d or "") for g, t, d in
             work.select("golden_path", "target_path", "target_dtype").iter_rows()]
    sizes = [_est_bytes(d, n) for d, n in
             work.select("target_dtype", "target_count").iter_rows()]
    est = estimated_seconds(sum(_est_bytes(d, n) for d, n in work.select(
        "golden_dtype", "golden_count").iter_rows()), sum(sizes), len(pairs))
    out: list[dict | None] = [None] * len(pairs)
    if scheduler is not None:
        from .dask_run import ClusterRun
        with ClusterRun(scheduler, jobs, connect_timeout) as run:
            report = run.compare(pairs, sizes, rtol, atol, out, progress)
    elif engine == "local-cluster" or (engine == "auto" and jobs > 1 and
                                         est >= LOCAL_CLUSTER_MIN_S):
        report = _on_local_cluster(pairs, sizes, rtol, atol, jobs, out, progress, engine, est)
    else:
        why = ("--engine in-process" if engine == "in-process" else "-j 1" if jobs <= 1 else
               f"about {est:.2g} s of work, under the {LOCAL_CLUSTER_MIN_S:g} s from which "
               "a local Dask cluster is started")
        report = EngineReport(why=why, in_process=_in_process(pairs, rtol, atol, out, progress))
    frame = pl.DataFrame(out, schema=PAIR_METRICS)
    return frame.with_columns(work.get_column("_i").alias("_i")), report


def _on_local_cluster(pairs: list[Pair], sizes: list[int], rtol: float | None,
                      atol: float | None, jobs: int, out: list,
                      progress: Callable[[int], None] | None, engine: str,
                      est: float) -> EngineReport:
    """`local-cluster`: every pair on the cluster. `auto`: the pairs in order here
    while the cluster starts, the rest on it once it is up (or here, if it cannot
    start)."""
    from .dask_run import ClusterError, ClusterStart

    why = ("--engine local-cluster" if engine == "local-cluster" else
           f"about {est:.2g} s of work in-process, over the {LOCAL_CLUSTER_MIN_S:g} s from "
           "which a local Dask cluster is started")
    start = ClusterStart(jobs)
    try:
        done = 0 if engine == "local-cluster" else _in_process(
            pairs, rtol, atol, out, progress, stop=start.ready.is_set)
        if done == len(pairs):
            return EngineReport(why=why + "; all pairs were done here before it was up",
                                in_process=done)
        try:
            run = start.result()
        except ClusterError as e:
            if engine == "local-cluster":
                raise
            _in_process(pairs, rtol, atol, out, progress, first=done)
            return EngineReport(why=f"{why}; it did not start ({e.__cause__!r}): all pairs "
                                "ran here", in_process=len(pairs))
        rest = out[done:]
        report = run.compare(pairs[done:], sizes[done:], rtol, atol, rest, progress)
        out[done:] = rest
        report.why, report.in_process = why, done
        return report
    finally:
        start.close()


def _in_process(pairs: list[Pair], rtol: float | None, atol: float | None, out: list,
                progress: Callable[[int], None] | None, first: int = 0,
                stop: Callable[[], bool] = lambda: False) -> int:
    """Computes pairs[first:] in order here until all are done or `stop()`;
    returns the index of the first pair not computed."""
    for i in range(first, len(pairs)):
        if stop():
            return i
        out[i] = row(file_metrics(*pairs[i], rtol, atol))
        if progress:
            progress(1)
    return len(pairs)
