"""A Linear's reference by sgemm within a bound, the float64 one where the bound leaves
a verdict open (refs.Approx, settle.py): every verdict and count as the float64
reference's, on outputs crafted at the edge of the tolerance and of float16's range."""

from __future__ import annotations

import numpy as np

from msprobe_atb.offline.replay import refs
from msprobe_atb.offline.replay.judge import judge_output
from msprobe_atb.offline.replay.refs import Terms
from msprobe_atb.offline.replay.settle import open_elements
from msprobe_atb.offline.replay.tolerances import tolerance_for

RNG = np.random.default_rng(20)
F16 = tolerance_for("float16")


def _linear(x: np.ndarray, w: np.ndarray) -> Terms:
    (terms,) = refs.linear({"hasBias": False}, [x, w.astype(np.float32)])
    return terms


def _crafted() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, w, dumped): rows 0-7 of x scaled so that a result of each lands near
    float16's largest value, dumped as Inf; every other element a few float64 units
    either side of its tolerance's edge, or far outside it, or exact."""
    x = RNG.normal(size=(48, 4096)).astype(np.float16)
    w = RNG.normal(size=(128, 4096)).astype(np.float16)
    r = _linear(x, w).value
    for i in range(8):
        x[i] = (x[i] * (F16.max_finite * (1 + (i - 4) * 2e-4) / np.abs(r[i]).max())).astype(
            np.float16)
    terms = _linear(x, w)
    r, m = terms.value, terms.magnitude()
    edge = (F16.rtol * np.abs(r) + F16.floor) + F16.atol * m
    d = r + np.sign(RNG.normal(size=r.shape)) * edge
    ulps = RNG.integers(-3, 4, size=r.shape)  # float64 units off the edge
    for _ in range(3):
        d = np.where(ulps > 0, np.nextafter(d, np.inf),
                     np.where(ulps < 0, np.nextafter(d, -np.inf), d))
        ulps -= np.sign(ulps)
    d[:, ::7] = r[:, ::7] + 3 * m[:, ::7]
    d[:, 1::11] = r[:, 1::11]
    d[:8] = np.where(np.abs(r[:8]) > F16.max_finite * 0.99, np.sign(r[:8]) * np.inf, d[:8])
    return x, w, d


def test_float32_reference_gives_the_float64_verdicts_at_the_edges(monkeypatch):
    x, w, d = _crafted()
    terms = _linear(x, w)
    assert terms.approx is not None
    r, m = terms.value, terms.magnitude()
    error = terms.approx.rel * m + terms.approx.least
    # The crafted elements are where the bound cannot settle them: at the tolerance's
    # edge and at float16's largest value.
    edge = open_elements(d, terms.approx.value(), error, m, F16)
    near_max = np.abs(np.abs(r) - F16.max_finite) <= error
    assert edge.mean() > 0.5 and (edge & near_max).any()
    asked = []
    exact = terms.approx.exact
    monkeypatch.setattr(terms.approx, "exact", lambda at: asked.append(at.size) or exact(at))
    new = judge_output(d, terms, "float16")
    old = judge_output(d, Terms(r, lambda: m), "float16")
    assert sum(asked) >= edge.sum()
    keys = ("verdict", "mismatched", "overflowed")
    assert {k: new.get(k) for k in keys} == {k: old.get(k) for k in keys}
    assert new["worst"] == old["worst"]
    assert 0 < old["mismatched"] < d.size


def test_its_exact_values_are_the_whole_products_bit_for_bit():
    """The float64 reference of single elements, by their row and columns, is the
    float64 product of the whole matrices, here at k 4096 and 8192, either layout."""
    for k in (4096, 8192):
        x = RNG.normal(size=(64, k)).astype(np.float16)
        w = RNG.normal(size=(1024, k)).astype(np.float16).astype(np.float32)
        for trans_b, weight in ((True, w), (False, np.ascontiguousarray(w.T))):
            (terms,) = refs.linear({"hasBias": True, "transposeB": trans_b},
                                   [x, weight, RNG.normal(size=1024).astype(np.float16)])
            at = RNG.choice(terms.value.size, size=500, replace=False)
            assert (terms.approx.exact(at) == terms.value.reshape(-1)[at]).all()


def test_float32_outputs_and_a_bound_as_wide_as_the_tolerance_keep_float64():
    """A float32 output's relative errors would move with sgemm's, however small its k;
    at k 16384 a float16 output's tolerance (1e-3 of the magnitude) is not twice sgemm's
    bound (9.8e-4): the float64 reference is computed, the sgemm is not."""
    for k, dtype, name in ((32, np.float32, "float"), (16384, np.float16, "float16")):
        x = RNG.normal(size=(4, k)).astype(dtype)
        w = RNG.normal(size=(16, k)).astype(dtype)
        terms = _linear(x, w)
        terms.approx.value = None  # never asked for
        assert judge_output(terms.value.astype(dtype), terms, name)["verdict"] == "ok"
