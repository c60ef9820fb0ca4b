"""compare's cells named as msProbe's `compare -m atb` columns hold msProbe's
values (msprobe_definitions.py, from its source) on real dumps: Golden/Target
Mean of fp32, fp16 and bf16 tensors; Max, Min and Mean N/A (null) where a tensor
holds NaN; Cosine, Max Absolute Err and Max Relative Err N/A exactly where the
two tensors hold NaN/Inf at different positions, and where the positions agree
computed as msProbe computes them (those elements 0 on both sides); no Cosine for
a tensor of one element."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest
from msprobe_definitions import cosine_na, errors_na, max_relative_err, tensor_stats
from offline_helpers import INJECT, module_real_dump

from msprobe_atb.offline import compare_dumps, load_bin, open_dump
from msprobe_atb.tree.names import os_path

ROUNDED = ("float16", "bf16")  # their means are exact to msProbe's: rounded to the dtype


@pytest.fixture(scope="module")
def bf16_injected(tmp_path_factory):
    """The injected fault of real_dumps["injected"], in a bf16 run."""
    yield from module_real_dump(tmp_path_factory, "bf16", "bf16", inject=INJECT)


def _zeroed(a: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(a), a, 0).astype(a.dtype)


@pytest.mark.parametrize("golden", ["fp32 clean", "bf16 injected"])
def test_cells_named_as_msprobes_hold_its_values(real_dumps, bf16_injected, golden):
    g_root = real_dumps["golden"] if golden == "fp32 clean" else bf16_injected
    res = compare_dumps(open_dump(g_root), open_dump(real_dumps["injected"]))
    seen: Counter = Counter()
    for r in res.rows.filter(pl.col("mode") == "tensor").iter_rows(named=True):
        pair = {}
        for side in ("golden", "target"):
            a = pair[side] = load_bin(os_path(r[f"{side}_path"]))
            dtype, want = r[f"{side}_dtype"], tensor_stats(a, r[f"{side}_dtype"])
            where = (r["op"], r["io"], r["index"], side, dtype)
            for k in ("max", "min"):
                assert (r[f"{side}_{k}"] is None) == (want[k] is None), where
            if want["mean"] is None:
                assert r[f"{side}_mean"] is None, where
            elif dtype in ROUNDED:
                assert r[f"{side}_mean"] == want["mean"], where
                seen[dtype] += 1
            else:  # msProbe's float32 sum against our exact mean, rounded to float32
                scale = float(np.abs(a.astype(np.float64)).mean())
                assert r[f"{side}_mean"] == pytest.approx(want["mean"], rel=1e-6,
                                                          abs=1e-6 * scale), where
            seen["nan"] += want["max"] is None
        g, t = pair["golden"], pair["target"]
        if errors_na(g, t):
            assert (r["cosine"], r["max_abs_err"], r["max_rel_err"]) == (None,) * 3, r["op"]
            seen["N/A"] += 1
        else:
            want = max_relative_err(_zeroed(g), _zeroed(t))
            assert r["max_rel_err"] == pytest.approx(want, rel=1e-12, abs=0), r["op"]
            assert (r["cosine"] is None) == cosine_na(g, t) and r["max_abs_err"] is not None
            seen["one element"] += g.size == 1
            seen["same NaN/Inf" if not np.isfinite(t).all() else "finite"] += 1
    assert seen["float16"] and seen["nan"] and seen["finite"] and seen["one element"], seen
    if golden == "fp32 clean":
        assert seen["N/A"], seen
    else:
        assert seen["bf16"] and seen["same NaN/Inf"], seen
