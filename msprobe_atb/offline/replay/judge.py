"""The verdict on one dumped output against its float64 reference.

`ok`: every element within the dtype's tolerance (tolerances.py), with the same
NaN/Inf pattern. `overflow`: the reference leaves the dtype's finite range where the
dumped value is Inf or saturated, and the rest agrees: the op computed what it was
asked and the dtype could not hold it. `own-error`: anything else that disagrees.

The output is judged in slices of CHUNK elements, so the temporaries stay small
however large the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .tolerances import Tolerance, tolerance_for

CHUNK = 1 << 20


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
    over_at: int = -1  # flat index of the largest overflowing reference
    over_mag: float = -1.0


def _held_scale(r: np.ndarray, tol: Tolerance) -> float:
    """The largest magnitude of the reference that the dtype can hold: an overflowing
    element must not widen the tolerance of the others."""
    scale = 0.0
    for i in range(0, r.size, CHUNK):
        a = np.abs(r[i:i + CHUNK])
        a = a[np.isfinite(a) & ((a <= tol.max_finite) if tol.max_finite else True)]
        if a.size:
            scale = max(scale, float(a.max()))
    return scale


def _tally(t: _Tally, base: int, d: np.ndarray, r: np.ndarray, tol: Tolerance,
           scale: float) -> None:
    finite_r, finite_d = np.isfinite(r), np.isfinite(d)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(d - r)
        agree = (err <= tol.rtol * np.abs(r) + tol.atol * scale) | (d == r) | (
            np.isnan(d) & np.isnan(r))
    over = np.zeros_like(agree)
    if tol.max_finite:
        beyond = finite_r & (np.abs(r) > tol.max_finite)
        over = beyond & (~finite_d | (np.abs(d) >= tol.max_finite)) & (np.sign(d) == np.sign(r))
    bad = ~agree & ~over
    both = finite_d & finite_r
    t.nan_inf_dumped += int((~finite_d).sum())
    t.nan_inf_float64 += int((~finite_r).sum())
    t.mismatched += int(bad.sum())
    if both.any():
        e, rb, db = err[both], r[both], d[both]
        t.max_abs_err = max(t.max_abs_err, float(e.max()))
        nz = rb != 0
        rel = np.where(nz, e / np.where(nz, np.abs(rb), 1.0), np.where(e > 0, np.inf, 0.0))
        t.max_rel_err = max(t.max_rel_err, float(rel.max()))
        t.dot += float(np.dot(db, rb))
        t.dd += float(np.dot(db, db))
        t.rr += float(np.dot(rb, rb))
        t.finite_pairs += int(both.sum())
    if over.any():
        t.overflowed += int(over.sum())
        mags = np.where(over, np.abs(r), -1.0)
        i = int(np.argmax(mags))
        if mags[i] > t.over_mag:
            t.over_mag, t.over_at = float(mags[i]), base + i
    if bad.any():
        # A NaN/Inf that should not be there first, then the largest error.
        score = np.where(bad, np.where(np.isfinite(err), err, np.inf), -1.0)
        i = int(np.argmax(score))
        if score[i] > t.worst_score:
            t.worst_score, t.worst = float(score[i]), base + i


def _agreeing(d: np.ndarray, r: np.ndarray, tol: Tolerance, scale: float) -> dict | None:
    """The metrics of an output that agrees everywhere, from the compare kernel's one
    pass (native/compare); None where any element disagrees (then judged in numpy)."""
    kind = _KERNEL_TYPES.get(d.dtype.str)
    if kind is None or not tol.max_finite:
        return None
    from ..metrics import Accumulator
    acc = Accumulator()
    atol = tol.atol * scale
    acc.add(np.ascontiguousarray(r, dtype=np.float64), _PK_F64, np.ascontiguousarray(d), kind,
            d.size, tol.rtol, atol)
    m = acc.metrics(tol.rtol, atol)
    if m["within_tol"] < 1.0 or not m["nonfinite_match"]:
        return None
    nonfinite = m["target_nan"] + m["target_pinf"] + m["target_ninf"]
    return {"max_abs_err": m.get("max_abs_err", 0.0), "max_rel_err": m.get("max_rel_err", 0.0),
            "cosine": m.get("cosine"), "nan_inf_dumped": nonfinite,
            "nan_inf_float64": nonfinite}


# The compare kernel's element type codes (native/compare/pair_kernel.h).
_PK_F64, _PK_F32, _PK_F16 = 0, 1, 2
_KERNEL_TYPES = {"<f8": _PK_F64, "<f4": _PK_F32, "<f2": _PK_F16}


def _cosine(t: _Tally) -> float | None:
    if not t.finite_pairs:
        return None
    if t.dd == 0.0 or t.rr == 0.0:
        return 1.0 if t.dd == t.rr else 0.0
    return t.dot / float(np.sqrt(t.dd) * np.sqrt(t.rr))


def _element(i: int, shape: tuple[int, ...], d: np.ndarray, r: np.ndarray) -> dict:
    return {"index": [int(k) for k in np.unravel_index(i, shape)] if shape else [],
            "dumped": float(d[i]), "float64": float(r[i])}


def judge_output(dumped: np.ndarray, ref: np.ndarray, dtype: str) -> dict:
    """Metrics and verdict ('ok' | 'own-error' | 'overflow') of one output."""
    tol = tolerance_for(dtype)
    out: dict = {"dtype": dtype, "tolerance": tol.describe(dtype), "shape": list(dumped.shape)}
    if dumped.size != ref.size:
        out.update(verdict="own-error", why=f"the dump holds {dumped.size} elements, the op's "
                   f"result has {ref.size} ({list(ref.shape)})")
        return out
    d, r = dumped.reshape(-1), ref.reshape(-1)
    scale = _held_scale(r, tol)
    fast = _agreeing(d, r, tol, scale)
    if fast is not None:
        out.update(fast, mismatched=0, verdict="ok")
        return out
    t = _Tally()
    for i in range(0, d.size, CHUNK):
        _tally(t, i, d[i:i + CHUNK].astype(np.float64), r[i:i + CHUNK].astype(np.float64),
               tol, scale)
    out.update(max_abs_err=t.max_abs_err, max_rel_err=t.max_rel_err, cosine=_cosine(t),
               mismatched=t.mismatched, nan_inf_dumped=t.nan_inf_dumped,
               nan_inf_float64=t.nan_inf_float64)
    if t.overflowed and not t.mismatched:
        w = _element(t.over_at, dumped.shape, d, r)
        v, side = w["float64"], "max" if w["float64"] > 0 else "min"
        out.update(verdict="overflow", worst=w, overflowed=t.overflowed,
                   why=f"float64 {side} {v:.3g} {'>' if v > 0 else '<'} {dtype} {side} "
                       f"{'' if v > 0 else '-'}{tol.max_finite:g}: {t.overflowed} element(s) "
                       "the dtype cannot hold")
    elif not t.mismatched:
        out["verdict"] = "ok"
    else:
        out.update(verdict="own-error", worst=_element(t.worst, dumped.shape, d, r),
                   why=f"{t.mismatched} of {d.size} elements outside {tol.describe(dtype)}")
    return out
