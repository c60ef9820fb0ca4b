"""Per-pair tensor metrics of a compare, run where the data lies.

compare.py decides which pairs to compare and turns these metrics into verdicts;
this module only computes them (metrics.file_metrics, or its pieces), in one of
three places:
* in the compare process, for `--jobs 1` or when the pairs hold too few bytes
  to pay for starting workers (LOCAL_CLUSTER_MIN_BYTES);
* on a local Dask cluster of `jobs` worker processes (one per core by default);
* on an existing Dask cluster (`--scheduler tcp://HOST:PORT`).
On a cluster, pairs go in batches (BATCH_BYTES / BATCH_PAIRS) to a worker that can
read both files (dask_roots.py: each worker announces its dump roots). A pair
whose files no single worker can read is cut into the metric kernel's chunks:
the target's worker reads each chunk, the scheduler moves it to the golden
side's worker, which accumulates it; only the accumulators come back, and the
report counts the bytes that travelled. Chunk accumulators merge in chunk order
on every path, so the metrics are the same bits wherever they were computed.
A pair whose workers all left the cluster, or that killed its workers
repeatedly, is reported `not-compared`, never passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from .dtypes import DTYPE_CODES, SPECS
from .metrics import file_metrics

# One row per pair; `state` is ok / not-saved / unreadable / not-compared, `reason` says why.
PAIR_METRICS = {
    "cosine": pl.Float64, "max_abs_err": pl.Float64, "max_rel_err": pl.Float64,
    "rmse": pl.Float64, "rel_rmse": pl.Float64, "within_tol": pl.Float64, "rtol": pl.Float64,
    "atol": pl.Float64, "nonfinite_match": pl.Boolean, "golden_nan": pl.Int64,
    "golden_pinf": pl.Int64, "golden_ninf": pl.Int64, "target_nan": pl.Int64,
    "target_pinf": pl.Int64, "target_ninf": pl.Int64, "state": pl.Utf8, "reason": pl.Utf8,
}
LOCAL_CLUSTER_MIN_BYTES = 1 << 30  # below, worker start-up (seconds) costs more than it saves
BATCH_BYTES = 64 << 20
BATCH_PAIRS = 256


@dataclass
class EngineReport:
    where: str = "in-process"
    workers: int = 1
    # (golden path, target path) -> address of the worker that computed the pair
    placement: dict[tuple[str, str], str] = field(default_factory=dict)
    moved_bytes: int = 0  # target bytes sent between workers
    moved_pairs: int = 0
    not_compared: int = 0

    def summary(self) -> str:
        per: dict[str, int] = {}
        for w in self.placement.values():
            per[w] = per.get(w, 0) + 1
        text = f"per-pair work: {self.where}"
        if per:
            text += " (" + ", ".join(f"{w}: {n} pairs" for w, n in sorted(per.items())) + ")"
        if self.moved_pairs:
            text += (f"; {self.moved_pairs} pair(s) read on two workers, "
                     f"{self.moved_bytes:,} bytes of target chunks travelled")
        if self.not_compared:
            text += f"; {self.not_compared} pair(s) NOT compared (see `reason`)"
        return text


Pair = tuple[str, str, str]  # golden path, target path, target dtype


def row(m: dict) -> dict:
    return {k: m.get(k) for k in PAIR_METRICS}


def _est_bytes(dtype: str, count) -> int:
    spec = SPECS.get(DTYPE_CODES.get(dtype, -2))
    return spec.nbytes(int(count or 0))[-1] if spec else 0


def pair_metrics(work: pl.DataFrame, rtol: float | None, atol: float | None, jobs: int,
                 progress: Callable[[int], None] | None,
                 scheduler: str | None = None) -> tuple[pl.DataFrame, EngineReport]:
    """Metrics of each row of `work` (columns _i, golden_path, target_path,
    target_dtype, target_count); rtol/atol None mean the target dtype's defaults.
    Returns PAIR_METRICS plus `_i`, in the order of `work`, and where it ran."""
    pairs = [(g, t, d or "") for g, t, d in
             work.select("golden_path", "target_path", "target_dtype").iter_rows()]
    sizes = [_est_bytes(d, n) for d, n in
             work.select("target_dtype", "target_count").iter_rows()]
    out: list[dict | None] = [None] * len(pairs)
    report = EngineReport()
    if scheduler is None and (jobs <= 1 or sum(sizes) < LOCAL_CLUSTER_MIN_BYTES):
        for i, p in enumerate(pairs):
            out[i] = row(file_metrics(*p, rtol, atol))
            if progress:
                progress(1)
    else:
        from .dask_run import ClusterRun
        with ClusterRun(scheduler, jobs) as run:
            report = run.compare(pairs, sizes, rtol, atol, out, progress)
    frame = pl.DataFrame(out, schema=PAIR_METRICS)
    return frame.with_columns(work.get_column("_i").alias("_i")), report


def batches(indices: list[int], sizes: list[int], workers: int = 1) -> list[list[int]]:
    """Consecutive pairs grouped until BATCH_BYTES or BATCH_PAIRS, and small enough
    that every worker gets several batches (load balance); a big pair alone."""
    spread = 4 * max(1, workers)
    max_bytes = max(1, min(BATCH_BYTES, sum(sizes[i] for i in indices) // spread))
    max_pairs = max(1, min(BATCH_PAIRS, -(-len(indices) // spread)))
    out: list[list[int]] = []
    cur: list[int] = []
    cur_bytes = 0
    for i in indices:
        if cur and (cur_bytes + sizes[i] > max_bytes or len(cur) >= max_pairs):
            out.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += sizes[i]
    if cur:
        out.append(cur)
    return out
