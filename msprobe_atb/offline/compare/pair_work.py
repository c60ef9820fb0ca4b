"""What the in-process and the cluster engines of pair_engine share: a pair, the
row of metrics it gives, the batches pairs go to workers in, and the report of
where they ran. Below both engines, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

# One row per pair; `state` is ok / not-saved / unreadable / not-compared, `reason` says why.
PAIR_METRICS = {
    "cosine": pl.Float64, "max_abs_err": pl.Float64, "max_rel_err": pl.Float64,
    "max_rel_err_atol": pl.Float64, "rmse": pl.Float64, "rel_rmse": pl.Float64,
    "within_tol": pl.Float64, "rtol": pl.Float64,
    "atol": pl.Float64, "nonfinite_match": pl.Boolean, "golden_nan": pl.Int64,
    "golden_pinf": pl.Int64, "golden_ninf": pl.Int64, "target_nan": pl.Int64,
    "target_pinf": pl.Int64, "target_ninf": pl.Int64, "state": pl.Utf8, "reason": pl.Utf8,
}
BATCH_BYTES = 64 << 20
BATCH_PAIRS = 256


@dataclass
class EngineReport:
    where: str = "in-process"
    workers: int = 1
    why: str = ""  # the rule that chose the engine
    in_process: int = 0  # pairs computed in the compare process
    # (golden path, target path) -> address of the worker that computed the pair
    placement: dict[tuple[str, str], str] = field(default_factory=dict)
    moved_bytes: int = 0  # target bytes sent between workers
    moved_pairs: int = 0
    not_compared: int = 0
    lost_why: dict[str, int] = field(default_factory=dict)  # why not compared -> pairs

    def summary(self) -> str:
        per: dict[str, int] = {}
        for w in self.placement.values():
            per[w] = per.get(w, 0) + 1
        text = f"per-pair work: {self.where}"
        if per:
            text += " (" + ", ".join(f"{w}: {n} pairs" for w, n in sorted(per.items())) + ")"
        if per and self.in_process:
            text += f"; {self.in_process} pair(s) in-process while the cluster started"
        if self.why:
            text += f" [{self.why}]"
        if self.moved_pairs:
            text += (f"; {self.moved_pairs} pair(s) read on two workers, "
                     f"{self.moved_bytes:,} bytes of target chunks travelled")
        if self.not_compared:
            text += f"; {self.not_compared} pair(s) NOT compared (see `reason`)"
        return text

    def as_dict(self) -> dict:
        return {"where": self.where, "workers": self.workers, "why": self.why,
                "pairs_in_process": self.in_process,
                "pairs_on_cluster": len(self.placement), "moved_pairs": self.moved_pairs,
                "moved_bytes": self.moved_bytes, "not_compared": self.not_compared,
                "not_compared_why": self.lost_why,
                "summary": self.summary()}


Pair = tuple[str, str, str]  # golden path, target path, target dtype


def row(m: dict) -> dict:
    return {k: m.get(k) for k in PAIR_METRICS}


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
