"""The search: the smallest set of ops whose promotion brings the chained output's
error under the target.

Every chained run is an evaluation, counted. The ranking promotes each searchable op
alone (n evaluations). Greedy addition then promotes the ranking's prefixes, doubling
the prefix until one is under the target and halving the gap back to the shortest one
(about 2·log2(j) evaluations for a prefix of j ops). Removal is delta debugging by
halves: with the ops found needed so far, the shortest prefix of the rest that still
reaches the target ends in an op that is needed, found by bisection (log2 of the rest
each); it stops once the needed ops alone reach the target. So a set of k ops costs
about n + 2·k·log2(n) evaluations, sets are any ops (not only contiguous layers), and
an evaluation already made is never made again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .chain import Chain


def relative_error(made: np.ndarray, golden: np.ndarray) -> float:
    """‖made − golden‖₂ / ‖golden‖₂ (inf when `made` holds NaN/Inf)."""
    made = made.astype(np.float64).reshape(-1)
    golden = golden.astype(np.float64).reshape(-1)
    if not np.isfinite(made).all():
        return math.inf
    norm = float(np.linalg.norm(golden))
    diff = float(np.linalg.norm(made - golden))
    return diff / norm if norm else diff


def largest_difference(made: np.ndarray, dumped: np.ndarray) -> float:
    """max |made − dumped| (0: equal, NaN where NaN; inf: NaN/Inf where the other has
    none)."""
    made, dumped = made.astype(np.float64), dumped.astype(np.float64)
    if np.array_equal(made, dumped, equal_nan=True):
        return 0.0
    with np.errstate(invalid="ignore"):
        d = np.abs(made - dumped)
    return math.inf if np.isnan(d).any() else float(d.max())


class BudgetSpent(Exception):
    """The evaluations allowed (--budget) are used up."""


class Evaluator:
    """The error of the chained output with a set of steps promoted, each set run once."""

    def __init__(self, chain: Chain, out_step: int, budget: int | None = None,
                 progress: Callable[[int], None] | None = None):
        self.chain, self.out_step = chain, out_step
        self.budget, self.progress = budget, progress
        self.evaluations = 0
        self.golden: np.ndarray | None = None  # set once known (it may be a chained run)
        self.seen: dict[frozenset[int], float] = {}

    def measure_against(self, golden: np.ndarray, deployed: np.ndarray) -> None:
        """Sets the golden, with the all-deployed run's output already made."""
        self.golden = golden
        self.seen[frozenset()] = relative_error(deployed, golden)

    def count(self) -> None:
        if self.budget is not None and self.evaluations >= self.budget:
            raise BudgetSpent
        self.evaluations += 1
        if self.progress:
            self.progress(1)

    def output(self, promoted: frozenset[int] = frozenset(), rest: str = "deployed"
               ) -> np.ndarray:
        self.count()
        return self.chain.run(promoted, rest)[self.out_step][0]

    def __call__(self, promoted) -> float:
        key = frozenset(promoted)
        if key not in self.seen:
            self.seen[key] = relative_error(self.output(key), self.golden)
        return self.seen[key]


@dataclass
class Result:
    before: float
    target: float
    after: float = math.nan
    ranking: list[tuple[int, float]] = field(default_factory=list)  # (step, error removed)
    chosen: list[int] = field(default_factory=list)
    reached: bool = False
    budget_spent: bool = False


def bound(n: int, k: int) -> float:
    """The evaluations the search may use for n searchable ops and k returned."""
    return 2 * k * math.log2(max(n, 2)) + n


def _shortest(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest i in (lo, hi] with ok(i), knowing not ok(lo) (or lo = 0) and ok(hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _add(err: Evaluator, ranked: list[int], target: float) -> int | None:
    """The shortest prefix of `ranked` under the target, by doubling then bisection
    (None: not even all of them)."""
    def ok(j: int) -> bool:
        return err(ranked[:j]) <= target
    j, last_bad = 1, 0
    while not ok(j):
        if j == len(ranked):
            return None
        last_bad, j = j, min(2 * j, len(ranked))
    return _shortest(ok, last_bad, j)


def _remove(err: Evaluator, prefix: list[int], target: float) -> list[int]:
    """The ops of `prefix` (under the target) that are needed, by halves."""
    needed: list[int] = []
    rest = list(prefix)
    while rest and not (needed and err(needed) <= target):
        i = _shortest(lambda j, rest=rest: err(needed + rest[:j]) <= target, 0, len(rest))
        needed.append(rest[i - 1])
        rest = rest[:i - 1]
    return needed


def _removed(before: float, after: float) -> float:
    """The error a promotion removes (none when both are infinite)."""
    return 0.0 if math.isinf(before) and math.isinf(after) else before - after


def search(err: Evaluator, candidates: list[int], target: float) -> Result:
    res = Result(before=err(()), target=target)
    res.after = res.before
    if res.before <= target:
        res.reached = True
        return res
    try:
        removed = [(c, _removed(res.before, err([c]))) for c in candidates]
        res.ranking = sorted(removed, key=lambda r: -r[1])
        ranked = [c for c, _ in res.ranking]
        j = _add(err, ranked, target)
        if j is None:
            res.chosen, res.after = ranked, err(ranked)
            return res
        res.chosen = sorted(_remove(err, ranked[:j], target))
        res.after, res.reached = err(res.chosen), True
    except BudgetSpent:
        res.budget_spent = True
        best = min(err.seen, key=err.seen.get)
        res.chosen, res.after = sorted(best), err.seen[best]
    return res
