"""The verdict on one dumped output against its float64 reference.

`ok`: every element within the dtype's tolerance (tolerances.py), with the same
NaN/Inf pattern. `overflow`: the reference leaves the dtype's finite range where the
dumped value is Inf or saturated, and the rest agrees: the op computed what it was
asked and the dtype could not hold it. `own-error`: anything else that disagrees.
"""

from __future__ import annotations

import numpy as np

from .tolerances import tolerance_for


def _worst(index: int, shape: tuple[int, ...], d: np.ndarray, r: np.ndarray) -> dict:
    return {"index": [int(i) for i in np.unravel_index(index, shape)] if shape else [],
            "dumped": float(d[index]), "float64": float(r[index])}


def _cosine(d: np.ndarray, r: np.ndarray) -> float | None:
    ok = np.isfinite(d) & np.isfinite(r)
    if not ok.any():
        return None
    a, b = d[ok], r[ok]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


def judge_output(dumped: np.ndarray, ref: np.ndarray, dtype: str) -> dict:
    """Metrics and verdict ('ok' | 'own-error' | 'overflow') of one output."""
    tol = tolerance_for(dtype)
    out: dict = {"dtype": dtype, "tolerance": tol.describe(dtype), "shape": list(dumped.shape)}
    if dumped.size != ref.size:
        out.update(verdict="own-error", why=f"the dump holds {dumped.size} elements, the op's "
                   f"result has {ref.size} ({list(ref.shape)})")
        return out
    d = dumped.astype(np.float64).reshape(-1)
    r = ref.astype(np.float64).reshape(-1)
    finite_r = np.isfinite(r)
    # The size of the output the dtype can hold: an overflowing element must not widen
    # the tolerance of the others.
    held_r = finite_r & ((np.abs(r) <= tol.max_finite) if tol.max_finite else True)
    scale = float(np.abs(r[held_r]).max()) if held_r.any() else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(d - r)
        bound = tol.rtol * np.abs(r) + tol.atol * scale
        agree = (err <= bound) | (d == r) | (np.isnan(d) & np.isnan(r))
        rel = np.where(np.abs(r) > 0, err / np.abs(r), np.where(err > 0, np.inf, 0.0))
    over = np.zeros_like(agree)
    if tol.max_finite:
        beyond = finite_r & (np.abs(r) > tol.max_finite)
        held = np.isinf(d) | (np.abs(d) >= tol.max_finite)
        over = beyond & held & (np.sign(d) == np.sign(r))
    both = np.isfinite(d) & finite_r
    out["max_abs_err"] = float(err[both].max()) if both.any() else 0.0
    out["max_rel_err"] = float(rel[both].max()) if both.any() else 0.0
    out["cosine"] = _cosine(d, r)
    out["mismatched"] = int((~agree & ~over).sum())
    out["nan_inf_dumped"] = int((~np.isfinite(d)).sum())
    out["nan_inf_float64"] = int((~finite_r).sum())
    if over.any() and out["mismatched"] == 0:
        i = int(np.flatnonzero(over)[np.argmax(np.abs(r[over]))])
        out.update(verdict="overflow", worst=_worst(i, dumped.shape, d, r),
                   overflowed=int(over.sum()),
                   why=f"float64 {'max' if r[i] > 0 else 'min'} {r[i]:.3g} "
                       f"{'>' if r[i] > 0 else '<'} {dtype} {'max' if r[i] > 0 else 'min'} "
                       f"{'' if r[i] > 0 else '-'}{tol.max_finite:g}: "
                       f"{int(over.sum())} element(s) the dtype cannot hold")
        return out
    if out["mismatched"] == 0:
        out["verdict"] = "ok"
        return out
    bad = ~agree & ~over
    # The worst element: a NaN/Inf that should not be there first, then the largest error.
    score = np.where(bad, np.where(np.isfinite(err), err, np.inf), -1.0)
    i = int(np.argmax(score))
    out.update(verdict="own-error", worst=_worst(i, dumped.shape, d, r),
               why=f"{out['mismatched']} of {d.size} elements outside {tol.describe(dtype)}")
    return out
