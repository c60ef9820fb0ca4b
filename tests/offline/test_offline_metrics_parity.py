"""The streamed, fused metrics (offline/read/metrics.py) give today's results: the
former whole-array numpy implementation (reference_metrics.py, test-only) is
the oracle, on every dtype (random bit patterns, so NaN/Inf/subnormal/extreme
values included), across chunk boundaries, and on a real compare."""

from __future__ import annotations

import math
import threading

import numpy as np
import polars as pl
import pytest
import reference_metrics as ref
from offline_synth import write_bin

from msprobe_atb.offline import compare_dumps, open_dump
from msprobe_atb.offline.compare import pair_engine
from msprobe_atb.offline.read import metrics
from msprobe_atb.offline.read.dtypes import SPECS, dtype_name

# Sums (norms, dot, squared error) may differ from numpy's summation order by
# a few units in the last place; everything else must be identical.
SUMMED = {"cosine", "rmse", "rel_rmse"}


def same_metrics(a: dict, b: dict) -> list[str]:
    bad = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if k in SUMMED and isinstance(x, float) and isinstance(y, float):
            if not (x == y or (math.isnan(x) and math.isnan(y))
                    or abs(x - y) <= 1e-12 * max(abs(x), abs(y))):
                bad.append(f"{k}: {x!r} vs {y!r}")
        elif not (x == y or (isinstance(x, float) and isinstance(y, float)
                             and math.isnan(x) and math.isnan(y))):
            bad.append(f"{k}: {x!r} vs {y!r}")
    return bad


def _payload(spec, n: int, rng) -> bytes:
    size = spec.nbytes(n)[-1] if spec.name != "string" else n
    return rng.integers(0, 256, size, dtype=np.uint8).tobytes()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the numpy oracle on random bits
@pytest.mark.parametrize("code", sorted(SPECS))
def test_every_dtype_matches_reference(code, tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "CHUNK", 64)  # many chunks, and a tail, from small files
    spec, rng = SPECS[code], np.random.default_rng(code)
    for n in (0, 1, 2, 3, 7, 64, 130, 200, 333):
        g = _payload(spec, n, rng)
        # target: the golden bytes with a share of them changed (some within tolerance)
        t = bytearray(g)
        for i in rng.integers(0, max(len(g), 1), len(g) // 3 if g else 0):
            t[i] = (t[i] + int(rng.integers(0, 3))) % 256
        gp = write_bin(tmp_path / f"g{n}.bin", g, code, (n,))
        tp = write_bin(tmp_path / f"t{n}.bin", bytes(t), code, (n,))
        for rtol in (None, 0.05):
            a = ref.file_metrics(str(gp), str(tp), dtype_name(code), rtol, rtol)
            b = metrics.file_metrics(str(gp), str(tp), dtype_name(code), rtol, rtol)
            assert not same_metrics(a, b), (dtype_name(code), n, same_metrics(a, b))


@pytest.mark.parametrize("gt", [(0, 1), (1, 0), (27, 0), (0, 11), (1, 27)])
def test_mixed_dtypes_and_nonfinite_match_reference(gt, tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "CHUNK", 64)
    rng = np.random.default_rng(7)
    base = rng.standard_normal((5, 61)) * 3
    base.flat[::17] = np.nan
    base.flat[5::23] = np.inf
    noisy = base * (1 + 1e-3 * rng.standard_normal(base.shape))
    noisy.flat[3::29] = -np.inf

    def as_code(a: np.ndarray, code: int) -> bytes:
        if code == 27:
            return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        return a.astype({0: np.float32, 1: np.float16, 11: np.float64}[code]).tobytes()

    with np.errstate(all="ignore"):
        gp = write_bin(tmp_path / "g.bin", as_code(base, gt[0]), gt[0], base.shape)
        tp = write_bin(tmp_path / "t.bin", as_code(noisy, gt[1]), gt[1], base.shape)
    a = ref.file_metrics(str(gp), str(tp), dtype_name(gt[1]), None, None)
    b = metrics.file_metrics(str(gp), str(tp), dtype_name(gt[1]), None, None)
    assert a["nonfinite_match"] is False and 0 < a["within_tol"] < 1
    assert not same_metrics(a, b)


def test_chunking_keeps_memory_fixed_and_results(tmp_path, monkeypatch):
    """A tensor of many chunks gives the whole-array result; the read buffers
    never grow past two chunks."""
    monkeypatch.setattr(metrics, "CHUNK", 1024)
    monkeypatch.setattr(metrics, "_LOCAL", threading.local())  # fresh buffers
    rng = np.random.default_rng(3)
    g = rng.standard_normal(50_000).astype(np.float16)
    t = (g.astype(np.float32) + 1e-3 * rng.standard_normal(g.size)).astype(np.float16)
    gp, tp = write_bin(tmp_path / "g.bin", g, 1), write_bin(tmp_path / "t.bin", t, 1)
    a = ref.file_metrics(str(gp), str(tp), "float16", None, None)
    b = metrics.file_metrics(str(gp), str(tp), "float16", None, None)
    assert not same_metrics(a, b)
    assert max(r._buf.size for r in metrics._readers()) <= 2 * 1024 * 2


@pytest.mark.parametrize("shape", ["rising", "first", "last", "tiny"])
def test_max_rel_err_wherever_the_maximum_lies(shape, tmp_path, monkeypatch):
    """The kernel skips the relative error's divisions where no element can beat the
    running maximum: the maximum is still exact when it rises in every block, is the
    very first element, the very last, or sits on values under the atol floor."""
    monkeypatch.setattr(metrics, "CHUNK", 1 << 20)  # one call, many kernel blocks
    rng = np.random.default_rng(11)
    n = 20_011
    g = rng.uniform(0.5, 2.0, n)
    err = {"rising": np.linspace(1e-6, 1e-2, n), "first": np.r_[0.3, np.full(n - 1, 1e-4)],
           "last": np.r_[np.full(n - 1, 1e-4), 0.3],
           "tiny": rng.uniform(0, 1e-3, n)}[shape]
    if shape == "tiny":
        g[::101] = 1e-12  # |g| under the floor: the floor is the denominator
    t = g * (1 + err * rng.choice([-1.0, 1.0], n))
    gp, tp = write_bin(tmp_path / "g.bin", g, 11), write_bin(tmp_path / "t.bin", t, 11)
    for tol in (None, 1e-3):
        a = ref.file_metrics(str(gp), str(tp), "float64", tol, tol)
        b = metrics.file_metrics(str(gp), str(tp), "float64", tol, tol)
        assert not same_metrics(a, b), same_metrics(a, b)


def test_real_compare_rows_unchanged(real_dumps, monkeypatch):
    """compare on real dumps (clean and with an injected Inf): every row the same
    as with the former numpy metrics."""
    golden = open_dump(real_dumps["golden"])
    for side in ("target", "injected"):
        target = open_dump(real_dumps[side])
        new = compare_dumps(golden, target).rows
        with monkeypatch.context() as m:
            m.setattr(pair_engine, "file_metrics", ref.file_metrics)
            old = compare_dumps(golden, target).rows
        assert new.height == old.height and new.columns == old.columns
        assert new.filter(pl.col("mode") == "tensor").height > 100
        for c in new.columns:
            if c in SUMMED:
                x, y = new.get_column(c).to_list(), old.get_column(c).to_list()
                assert all((a is None and b is None) or same_metrics({c: a}, {c: b}) == []
                           for a, b in zip(x, y)), c
            else:
                assert new.get_column(c).equals(old.get_column(c), check_names=False), c
        assert new.get_column("verdict").to_list() == old.get_column("verdict").to_list()
