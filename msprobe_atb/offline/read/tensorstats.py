"""Statistics of a loaded tensor, with the same meaning as the probe's records
(contracts §4): max/min ignore NaN, mean/norm over all elements, extra counts."""

from __future__ import annotations

import numpy as np

STAT_KEYS = ("count", "max", "min", "mean", "norm", "nan", "pinf", "ninf", "zero")


def tensor_stats(arr: np.ndarray) -> dict[str, float | int | None]:
    """count, max, min, mean, norm (L2), nan, pinf, ninf, zero of one tensor.

    Complex tensors report |z| for max/min and |mean|; string tensors only count.
    +Inf and -Inf in one tensor make a NaN mean, as in the probe, without a warning."""
    with np.errstate(invalid="ignore"):
        return _stats(arr)


def _stats(arr: np.ndarray) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = dict.fromkeys(STAT_KEYS)
    out["count"] = int(arr.size)
    if arr.size == 0 or arr.dtype.kind not in "biufc":
        return out
    if arr.dtype.kind == "c":
        mag = np.abs(arr).astype(np.float64)
        out.update(_float_stats(mag))
        out["mean"] = float(np.abs(arr.astype(np.complex128).mean()))
        out["nan"] = int(np.isnan(arr).sum())
        return out
    if arr.dtype.kind in "bui" or arr.dtype == np.bool_:
        a = arr.astype(np.int64) if arr.dtype.kind != "u" else arr.astype(np.uint64)
        out.update(max=int(a.max()), min=int(a.min()), mean=float(a.mean(dtype=np.float64)),
                   norm=float(np.sqrt(np.square(a, dtype=np.float64).sum())),
                   nan=0, pinf=0, ninf=0, zero=int((a == 0).sum()))
        return out
    out.update(_float_stats(arr.astype(np.float64, copy=False)))
    return out


def _float_stats(a: np.ndarray) -> dict[str, float | int]:
    nan = np.isnan(a)
    n_nan = int(nan.sum())
    finite_or_inf = a[~nan] if n_nan else a
    mx = float(finite_or_inf.max()) if finite_or_inf.size else float("nan")
    mn = float(finite_or_inf.min()) if finite_or_inf.size else float("nan")
    return dict(max=mx, min=mn, mean=float(a.mean()), norm=float(np.sqrt(np.square(a).sum())),
                nan=n_nan, pinf=int(np.isposinf(a).sum()), ninf=int(np.isneginf(a).sum()),
                zero=int((a == 0).sum()))
