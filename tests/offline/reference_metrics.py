"""The whole-array numpy metrics that offline/read/metrics.py replaced, kept
unchanged (test-only) as the oracle of test_offline_metrics_parity.py. The
definitions are in read/metrics.py's docstring."""

from __future__ import annotations

import math

import numpy as np
from msprobe_definitions import max_relative_err

from msprobe_atb.offline.read.binfile import BinFileError, TensorNotSaved, load_bin
from msprobe_atb.offline.read.dtypes import tolerance


def _as_float(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return a.astype(np.complex128).view(np.float64)
    return a.astype(np.float64, copy=False)


def _parts(a: np.ndarray) -> np.ndarray:
    """The real values in their own precision: complex as its interleaved parts."""
    return a.view(a.real.dtype).ravel() if a.dtype.kind == "c" else a.ravel()


def _counts(a: np.ndarray) -> tuple[int, int, int]:
    return int(np.isnan(a).sum()), int(np.isposinf(a).sum()), int(np.isneginf(a).sum())


def array_metrics(g: np.ndarray, t: np.ndarray, rtol: float, atol: float) -> dict:
    out: dict = {"rtol": rtol, "atol": atol}
    if g.shape != t.shape:
        out["reason"] = f"shape differs: golden {g.shape} vs target {t.shape}"
        return out
    gp, tp = _parts(g), _parts(t)
    g, t = _as_float(g).ravel(), _as_float(t).ravel()
    out["golden_nan"], out["golden_pinf"], out["golden_ninf"] = _counts(g)
    out["target_nan"], out["target_pinf"], out["target_ninf"] = _counts(t)
    gf, tf = np.isfinite(g), np.isfinite(t)
    same_nonfinite = (~gf & ~tf) & ((np.isnan(g) & np.isnan(t)) | (g == t))
    out["nonfinite_match"] = bool(np.array_equal(gf, tf) and same_nonfinite.sum() == (~gf).sum())
    both = gf & tf
    gb, tb = g[both], t[both]
    d = np.abs(tb - gb)
    ok = d <= atol + rtol * np.abs(gb)
    n = g.size
    out["within_tol"] = float((ok.sum() + same_nonfinite.sum()) / n) if n else 1.0
    if gb.size:
        ng, nt = float(np.linalg.norm(gb)), float(np.linalg.norm(tb))
        if ng == 0 and nt == 0:
            cos = 1.0
        elif ng == 0 or nt == 0:
            cos = 0.0
        else:
            cos = float(np.dot(gb, tb) / (ng * nt))
        rmse = float(np.sqrt(np.mean(np.square(tb - gb))))
        rms_g = ng / math.sqrt(gb.size)
        out.update(cosine=cos, max_abs_err=float(d.max()), rmse=rmse,
                   max_rel_err=max_relative_err(gp[both], tp[both]),
                   max_rel_err_atol=float((d / np.maximum(np.abs(gb), atol or 1e-30)).max()),
                   rel_rmse=rmse / rms_g if rms_g > 0 else (0.0 if rmse == 0 else math.inf))
    return out


def file_metrics(golden: str, target: str, target_dtype: str,
                 rtol: float | None, atol: float | None) -> dict:
    """Metrics of one pair of `.bin` files (aliases followed); errors become a reason."""
    drt, dat = tolerance(target_dtype)
    rtol = drt if rtol is None else rtol
    atol = dat if atol is None else atol
    try:
        g = load_bin(golden)
        t = load_bin(target)
    except TensorNotSaved as e:
        return {"state": "not-saved", "reason": str(e), "rtol": rtol, "atol": atol}
    except BinFileError as e:
        return {"state": "unreadable", "reason": str(e), "rtol": rtol, "atol": atol}
    return {"state": "ok", **array_metrics(g, t, rtol, atol)}
