"""msProbe's `compare -m atb` metrics, written in numpy from its definitions (the
mindstudio-probe 26.2.0 wheel), as the oracle our columns of the same name are
checked against. Not msProbe's code: the definitions only.

* Max Relative Err: both tensors in numpy's result type of the two and float32;
  where golden is 0, golden and target both get that type's machine epsilon
  added; then max |(target − golden) / golden|.
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
