"""Which elements' verdicts a reference known only within a bound leaves open.

judge.py's verdict on an element is a function of the reference r: it agrees when
s(r) = |d - r| - (rtol |r| + floor + atol m) <= 0, and overflows (with d Inf or
saturated, of r's sign) when |r| > the dtype's largest finite value. Within a bound e
of r, s moves by at most (1 + rtol) e: where |s| is larger, with room for float64's
rounding of both sides, and |r| is farther than e from that largest value, the
verdict is the one the reference itself gives. A dumped NaN/Inf disagrees with any
finite r."""

from __future__ import annotations

import numpy as np

from .tolerances import Tolerance

_ROUNDING = 2.0 ** -40  # relative: float64's roundings of s, both here and in judge.py


def open_elements(d: np.ndarray, approx: np.ndarray, error: np.ndarray, magnitude: np.ndarray,
                  tol: Tolerance) -> np.ndarray:
    """Where the verdict of dumped `d` against a reference within `error` of `approx`
    (terms' magnitudes `magnitude`) may differ from its verdict against `approx`."""
    d = d.astype(np.float64)
    finite_d = np.isfinite(d)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_r = np.abs(approx)
        limit = tol.rtol * abs_r + tol.floor + tol.atol * magnitude
        s = np.abs(d - approx) - limit
        room = (1 + tol.rtol) * error + _ROUNDING * (np.where(finite_d, np.abs(d), 0.0) + abs_r +
                                                     error + limit)
        unsure = finite_d & ~(np.abs(s) > room)
        unsure |= ~np.isfinite(approx) | ~np.isfinite(error)
        if tol.max_finite:
            unsure |= ~(np.abs(abs_r - tol.max_finite) > error + _ROUNDING * tol.max_finite)
    return unsure
