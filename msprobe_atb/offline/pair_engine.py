"""Per-pair tensor metrics of a compare: runs metrics.file_metrics over every
matched (golden, target) file pair, in parallel, and returns one row per pair.

compare.py decides which pairs to compare and turns these metrics into verdicts;
this module only computes them.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import polars as pl

from .metrics import file_metrics

# One row per pair; `state` is ok / not-saved / unreadable, `reason` says why not ok.
PAIR_METRICS = {
    "cosine": pl.Float64, "max_abs_err": pl.Float64, "max_rel_err": pl.Float64,
    "rmse": pl.Float64, "rel_rmse": pl.Float64, "within_tol": pl.Float64, "rtol": pl.Float64,
    "atol": pl.Float64, "nonfinite_match": pl.Boolean, "golden_nan": pl.Int64,
    "golden_pinf": pl.Int64, "golden_ninf": pl.Int64, "target_nan": pl.Int64,
    "target_pinf": pl.Int64, "target_ninf": pl.Int64, "state": pl.Utf8, "reason": pl.Utf8,
}


def _job(args: tuple) -> dict:
    return file_metrics(*args)


def pair_metrics(work: pl.DataFrame, rtol: float | None, atol: float | None, jobs: int,
                 progress: Callable[[int], None] | None) -> pl.DataFrame:
    """Metrics of each row of `work` (columns _i, golden_path, target_path,
    target_dtype); rtol/atol None mean the target dtype's defaults. Returns
    PAIR_METRICS plus `_i`, in the order of `work`."""
    args = [(g, t, d or "", rtol, atol) for g, t, d in
            work.select("golden_path", "target_path", "target_dtype").iter_rows()]
    out: list[dict] = []

    def take(m: dict) -> None:
        out.append({k: m.get(k) for k in PAIR_METRICS})
        if progress:
            progress(1)

    if jobs > 1 and len(args) > 32:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            for m in ex.map(_job, args, chunksize=8):
                take(m)
    else:
        for a in args:
            take(_job(a))
    return pl.DataFrame(out, schema=PAIR_METRICS).with_columns(
        work.get_column("_i").alias("_i"))
