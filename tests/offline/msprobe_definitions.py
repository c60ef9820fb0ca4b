"""msProbe's `compare -m atb` metrics, written in numpy from its definitions (the
mindstudio-probe 26.2.0 wheel), as the oracle our columns of the same name are
checked against. Not msProbe's code: the definitions only.

* Max Relative Err: both tensors in numpy's result type of the two and float32;
  where golden is 0, golden and target both get that type's machine epsilon
  added; then max |(target − golden) / golden|.
* Golden/Target Max, Min, Mean (cal_single_tensor_stats): torch on the tensor,
  float64 and integer tensors first made float32; torch's mean of an fp16 or bf16
  tensor sums in float32 and rounds the result to the tensor's dtype; a result
  that prints as 'nan' is N/A (a NaN anywhere: Max and Min too, torch propagates it).
* Cosine, Max Absolute Err, Max Relative Err are N/A when the NaN positions or
  the Inf positions (either sign) of the two tensors differ (handle_inf_nan);
  where they agree, those elements are set to 0 on both sides. Cosine is
  "unsupported" for a tensor of one element (validate_numpy).
"""

from __future__ import annotations

import numpy as np


def max_relative_err(golden: np.ndarray, target: np.ndarray) -> float:
    """msProbe's Max Relative Err of two real arrays of the same shape."""
    g, t = golden.ravel(), target.ravel()
    if g.dtype.kind != "f":
        g = g.astype(np.float64)
    if t.dtype.kind != "f":
        t = t.astype(np.float64)
    kind = np.result_type(g, t, np.float32)
    g, t = g.astype(kind), t.astype(kind)
    eps = np.finfo(kind).eps
    zero = g == 0
    t = np.where(zero, t + eps, t)
    g = np.where(zero, eps, g)
    with np.errstate(over="ignore"):
        return float(np.abs((t - g) / g).max())


def tensor_stats(a: np.ndarray, dtype: str) -> dict[str, float | None]:
    """msProbe's Max, Min, Mean of a tensor of `dtype` (our name: float16, bf16,
    float, ...), given as numpy values (bf16 widened to float32); None for N/A."""
    import ml_dtypes

    x = a.ravel().astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        mean = x.mean(dtype=np.float32)
        if dtype == "float16":
            mean = mean.astype(np.float16)
        elif dtype == "bf16":
            mean = mean.astype(ml_dtypes.bfloat16)
        out = {"max": float(x.max()), "min": float(x.min()), "mean": float(mean)}
    return {k: None if np.isnan(v) else v for k, v in out.items()}


def errors_na(golden: np.ndarray, target: np.ndarray) -> bool:
    """Whether msProbe writes N/A for Cosine, Max Absolute Err, Max Relative Err."""
    g, t = golden.astype(np.float64).ravel(), target.astype(np.float64).ravel()
    return not (np.array_equal(np.isinf(g), np.isinf(t))
                and np.array_equal(np.isnan(g), np.isnan(t)))


def cosine_na(golden: np.ndarray, target: np.ndarray) -> bool:
    """Whether msProbe writes no Cosine (N/A or unsupported)."""
    return golden.size == 1 or target.size == 1 or errors_na(golden, target)
