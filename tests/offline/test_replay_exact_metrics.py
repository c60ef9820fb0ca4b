"""Every figure replay gives of a half-precision Linear output (verdict, counts, worst
element, max absolute and relative errors, cosine) is the float64 product's, bit for
bit: on outputs whose references cancel to near zero, on garbage and on a good
output. An approximation of the product within a rigorous bound cannot give them: the
cosine, printed to 17 digits in JSON, moves with every element's reference, and
sgemm's bound leaves it open from the second digit (refs.linear)."""

from __future__ import annotations

import numpy as np
import pytest

from msprobe_atb.offline.replay import refs
from msprobe_atb.offline.replay.judge import judge_output
from msprobe_atb.offline.replay.refs import Terms

RNG = np.random.default_rng(21)


def _cancelling_linear() -> tuple[np.ndarray, np.ndarray]:
    """(x, w) of fp16 whose product has columns 0-15 cancelling to near zero: each of
    those rows of w is its pairs' negation but for one term, so the sum of 4096 terms
    of magnitude ~1 is a single small product."""
    x = RNG.normal(size=(64, 4096)).astype(np.float16)
    x[:, 1::2] = x[:, 0::2]
    w = RNG.normal(size=(256, 4096)).astype(np.float16)
    w[:16, 1::2] = -w[:16, 0::2]
    w[:16, 1] += np.float16(2.0 ** -9)
    return x, w


def _outputs(r: np.ndarray) -> dict[str, np.ndarray]:
    good = r.astype(np.float16)
    garbage = (RNG.normal(size=r.shape) * np.abs(r).mean()).astype(np.float16)
    half = good.copy()
    half[::2] = garbage[::2]
    return {"good": good, "garbage": garbage, "half garbage": half}


@pytest.mark.parametrize("name", ["good", "garbage", "half garbage"])
def test_every_printed_figure_is_the_float64_references(name):
    x, w = _cancelling_linear()
    (terms,) = refs.linear({"hasBias": False}, [x, w])
    r, m = x.astype(np.float64) @ w.astype(np.float64).T, terms.magnitude()
    assert (np.abs(r[:, :16]) < 1e-2).all() and (m[:, :16] > 1e3).all()
    d = _outputs(r)[name]
    assert judge_output(d, terms, "float16") == judge_output(d, Terms(r, lambda: m), "float16")
