"""Per-tensor comparison metrics, golden vs target.

Definitions (n = number of elements; g = golden, t = target, both as float64):
* cosine = g·t / (‖g‖‖t‖) over elements finite on both sides; 1 if both are all
  zero, 0 if only one is;
* max_abs_err = max |t − g|; rmse = sqrt(mean((t − g)²)); rel_rmse = rmse / rms(g);
* max_rel_err = max |t − g| / max(|g|, atol): the atol floor keeps values near
  zero from blowing the relative error up;
* within_tol = share of elements with |t − g| ≤ atol + rtol·|g|, where (rtol, atol)
  come from the TARGET's dtype (dtypes.TOLERANCES: fp16 1e-3, bf16 8e-3, fp32 1e-5,
  integers exact). A NaN or ±Inf element counts as within only if the other side
  has the same non-finite value at the same position;
* nonfinite_match: NaN and ±Inf positions (and signs) agree on both sides.
The finite metrics (cosine, errors) are over positions finite on both sides.
"""

from __future__ import annotations

import math

import numpy as np

from msprobe_atb.offline.binfile import BinFileError, TensorNotSaved, load_bin
from msprobe_atb.offline.dtypes import tolerance


def _as_float(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return a.astype(np.complex128).view(np.float64)
    return a.astype(np.float64, copy=False)


def _counts(a: np.ndarray) -> tuple[int, int, int]:
    return int(np.isnan(a).sum()), int(np.isposinf(a).sum()), int(np.isneginf(a).sum())


def array_metrics(g: np.ndarray, t: np.ndarray, rtol: float, atol: float) -> dict:
    out: dict = {"rtol": rtol, "atol": atol}
    if g.shape != t.shape:
        out["reason"] = f"shape differs: golden {g.shape} vs target {t.shape}"
        return out
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
                   max_rel_err=float((d / np.maximum(np.abs(gb), atol or 1e-30)).max()),
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
