"""The verdict on one dumped output against its float64 reference.

`ok`: every element within the dtype's tolerance (tolerances.py), with the same
NaN/Inf pattern. `overflow`: the reference leaves the dtype's finite range where the
dumped value is Inf or saturated, and the rest agrees: the op computed what it was
asked and the dtype could not hold it. `own-error`: anything else that disagrees.

The reference may arrive in pieces of rows (OutputJudge.add), and each piece is
judged in slices of CHUNK elements, so memory stays small however large the
tensor: the compare kernel (native/compare) takes a slice in one pass, and only a
slice that disagrees is looked at element by element in numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..read.metrics import Accumulator, max_rel_err64
from .refs import Terms
from .tolerances import Tolerance, tolerance_for

CHUNK = 1 << 20
# The compare kernel's element type codes (native/compare/pair_kernel.h).
_PK_F64, _PK_F32, _PK_F16 = 0, 1, 2
_KERNEL_TYPES = {"<f8": _PK_F64, "<f4": _PK_F32, "<f2": _PK_F16}


@dataclass
class _Tally:
    mismatched: int = 0
    overflowed: int = 0
    nan_inf_dumped: int = 0
    nan_inf_float64: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    dot: float = 0.0
    dd: float = 0.0
    rr: float = 0.0
    finite_pairs: int = 0
    worst: int = -1  # flat index of the worst mismatching element
    worst_score: float = -1.0
    worst_values: tuple[float, float] = (0.0, 0.0)
    over_at: int = -1  # flat index of the largest overflowing reference
    over_mag: float = -1.0
    over_values: tuple[float, float] = (0.0, 0.0)


def _tally(t: _Tally, base: int, d: np.ndarray, r: np.ndarray, tol: Tolerance,
           magnitude: Callable[[], np.ndarray]) -> None:
    """Adds a slice's verdicts to the tally; `magnitude()` gives its elements' terms'
    magnitudes, asked for only when |r| alone does not settle every element."""
    finite_r = np.isfinite(r)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(d - r)
        abs_r = np.abs(r)
        allowed = tol.rtol * abs_r + tol.floor
        same = (d == r) | (np.isnan(d) & np.isnan(r))
        agree = (err <= allowed) | same
        if tol.atol and not agree.all():
            agree = (err <= allowed + tol.atol * magnitude()) | same
    over = np.zeros_like(agree)
    if tol.max_finite:
        beyond = finite_r & (abs_r > tol.max_finite)
        if beyond.any():
            over = beyond & (~np.isfinite(d) | (np.abs(d) >= tol.max_finite)) & \
                (np.sign(d) == np.sign(r))
    bad = ~agree & ~over
    t.mismatched += int(bad.sum())
    if over.any():
        t.overflowed += int(over.sum())
        mags = np.where(over, abs_r, -1.0)
        i = int(np.argmax(mags))
        if mags[i] > t.over_mag:
            t.over_mag, t.over_at, t.over_values = float(mags[i]), base + i, (d[i], r[i])
    if bad.any():
        # A NaN/Inf that should not be there first, then the largest error.
        score = np.where(bad, np.where(np.isfinite(err), err, np.inf), -1.0)
        i = int(np.argmax(score))
        if score[i] > t.worst_score:
            t.worst_score, t.worst, t.worst_values = float(score[i]), base + i, (d[i], r[i])


def _tally_metrics(t: _Tally, d: np.ndarray, r: np.ndarray) -> None:
    """Adds a slice to the tally's metrics, for a dtype the compare kernel does not
    take (where it does, its metrics are the kernel's)."""
    finite_r, finite_d = np.isfinite(r), np.isfinite(d)
    both = finite_d & finite_r
    t.nan_inf_dumped += int((~finite_d).sum())
    t.nan_inf_float64 += int((~finite_r).sum())
    if both.any():
        rb, db = r[both], d[both]
        with np.errstate(over="ignore"):
            t.max_abs_err = max(t.max_abs_err, float(np.abs(db - rb).max()))
        t.max_rel_err = max(t.max_rel_err, max_rel_err64(rb, db))
        t.dot += float(np.dot(db, rb))
        t.dd += float(np.dot(db, db))
        t.rr += float(np.dot(rb, rb))
        t.finite_pairs += int(both.sum())


class OutputJudge:
    """Judges one dumped output against its reference, given whole or by rows."""

    def __init__(self, dumped: np.ndarray, dtype: str):
        self.shape, self.dtype = dumped.shape, dtype
        self.tol = tolerance_for(dtype)
        self.flat = dumped.reshape(-1)
        self.row = math.prod(dumped.shape[1:]) if dumped.ndim else 1
        self.kind = _KERNEL_TYPES.get(self.flat.dtype.str) if self.tol.max_finite else None
        self.tally = _Tally()
        self.acc = None
        self.seen = 0
        self.misfit: str | None = None

    def shape_problem(self, shape: tuple, first_row: int = 0, whole: bool = True) -> str | None:
        """Why a result of `shape` (the whole result, or rows from `first_row` on)
        cannot be the dumped output, or None. The same elements in another shape do
        not pass."""
        shape = tuple(shape)
        if whole:
            return None if shape == self.shape else \
                f"the op's result has shape {list(shape)} where the dump holds {list(self.shape)}"
        if len(shape) == len(self.shape) and shape and shape[1:] == self.shape[1:] and \
                first_row + shape[0] <= self.shape[0]:
            return None
        return (f"the op's result has rows of shape {list(shape[1:])} where the dump holds "
                f"{list(self.shape)}")

    def add(self, ref: np.ndarray | Terms, first_row: int = 0, whole: bool = True) -> None:
        """The reference of the output's rows from `first_row` on (all of it if `whole`)."""
        value, terms = (ref.value, ref.magnitude) if isinstance(ref, Terms) else (ref, None)
        self.misfit = self.misfit or self.shape_problem(value.shape, first_row, whole)
        if self.misfit:
            return
        r = value.reshape(-1)
        start = first_row * self.row
        d = self.flat[start:start + r.size]
        made: list[np.ndarray] = []

        def magnitude(i: int, n: int) -> np.ndarray:
            if not made:
                m = np.abs(value) if terms is None else terms()
                made.append(np.asarray(m, dtype=np.float64).reshape(-1))
            return made[0][i:i + n]

        for i in range(0, r.size, CHUNK):
            n = min(CHUNK, r.size - i)
            self._slice(d[i:i + n], r[i:i + n], lambda i=i, n=n: magnitude(i, n), start + i)
        self.seen += r.size

    def _slice(self, d: np.ndarray, r: np.ndarray, magnitude: Callable[[], np.ndarray],
               base: int) -> None:
        r64 = np.ascontiguousarray(r, dtype=np.float64)
        if self.kind is not None:
            # The kernel checks |d-r| <= rtol*|r| + floor, stricter than the tolerance: a
            # slice it passes is ok; any other is judged element by element below.
            piece = Accumulator()
            piece.add(r64, _PK_F64, np.ascontiguousarray(d), self.kind, d.size, self.tol.rtol,
                      self.tol.floor)
            if self.acc is None:
                self.acc = Accumulator()
            self.acc.merge(piece)
            m = piece.metrics(self.tol.rtol, self.tol.floor)
            if m["within_tol"] == 1.0 and m["nonfinite_match"]:
                return
        d64 = d.astype(np.float64)
        if self.acc is None:
            _tally_metrics(self.tally, d64, r64)
        _tally(self.tally, base, d64, r64, self.tol, magnitude)

    def _metrics(self) -> dict:
        t = self.tally
        if self.acc is not None:
            m = self.acc.metrics(self.tol.rtol, self.tol.floor)
            return {"max_abs_err": m.get("max_abs_err", 0.0),
                    "max_rel_err": m.get("max_rel_err", 0.0), "cosine": m.get("cosine"),
                    "nan_inf_dumped": m["target_nan"] + m["target_pinf"] + m["target_ninf"],
                    "nan_inf_float64": m["golden_nan"] + m["golden_pinf"] + m["golden_ninf"]}
        cos = None
        if t.finite_pairs:
            cos = (1.0 if t.dd == t.rr else 0.0) if t.dd == 0.0 or t.rr == 0.0 else \
                t.dot / (math.sqrt(t.dd) * math.sqrt(t.rr))
        return {"max_abs_err": t.max_abs_err, "max_rel_err": t.max_rel_err, "cosine": cos,
                "nan_inf_dumped": t.nan_inf_dumped, "nan_inf_float64": t.nan_inf_float64}

    def _element(self, i: int, values: tuple[float, float]) -> dict:
        return {"index": [int(k) for k in np.unravel_index(i, self.shape)] if self.shape
                else [], "dumped": float(values[0]), "float64": float(values[1])}

    def result(self) -> dict:
        """Metrics and verdict ('ok' | 'own-error' | 'overflow')."""
        tol, t, dtype = self.tol, self.tally, self.dtype
        out: dict = {"dtype": dtype, "tolerance": tol.describe(dtype), "shape": list(self.shape)}
        if self.misfit or self.seen != self.flat.size:
            out.update(verdict="own-error", why=self.misfit or f"the op's result covers "
                       f"{self.seen} of the {self.flat.size} elements the dump holds")
            return out
        out.update(self._metrics(), mismatched=t.mismatched)
        if t.overflowed and not t.mismatched:
            w = self._element(t.over_at, t.over_values)
            v, side = w["float64"], "max" if w["float64"] > 0 else "min"
            out.update(verdict="overflow", worst=w, overflowed=t.overflowed,
                       why=f"float64 {side} {v:.3g} {'>' if v > 0 else '<'} {dtype} {side} "
                           f"{'' if v > 0 else '-'}{tol.max_finite:g}: {t.overflowed} "
                           "element(s) the dtype cannot hold")
        elif not t.mismatched:
            out["verdict"] = "ok"
        else:
            out.update(verdict="own-error", worst=self._element(t.worst, t.worst_values),
                       why=f"{t.mismatched} of {self.flat.size} elements outside "
                           f"{tol.describe(dtype)}")
        return out


def judge_output(dumped: np.ndarray, ref: np.ndarray | Terms, dtype: str) -> dict:
    """The verdict of one output whose whole reference is at hand."""
    judge = OutputJudge(dumped, dtype)
    judge.add(ref)
    return judge.result()
