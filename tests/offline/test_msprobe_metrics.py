"""Our metrics named like msProbe's `compare -m atb` columns follow msProbe's
definitions (msprobe_definitions.py): compare's max_rel_err is its Max Relative
Err, and replay's max rel err is the same formula against the float64 recompute."""

from __future__ import annotations

import numpy as np
import pytest
from msprobe_definitions import max_relative_err
from offline_synth import write_bin

from msprobe_atb.offline.read import metrics
from msprobe_atb.offline.replay.judge import OutputJudge

CODES = {np.float16: 1, np.float32: 0, np.float64: 11}


def _pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(31)
    g = rng.standard_normal(4099)
    g[::7] = 0.0  # zeros in golden: msProbe's epsilon, not an atol floor
    g[1::11] *= 1e-6  # tiny values
    t = g * (1 + 1e-3 * rng.standard_normal(g.size)) + 1e-4 * rng.standard_normal(g.size)
    t[::14] = 0.0  # a zero on both sides too
    return {"spread": (g, t), "all-zero golden": (np.zeros(64), np.linspace(-1, 1, 64)),
            "equal": (g, g.copy())}


@pytest.mark.parametrize("name", sorted(_pairs()))
@pytest.mark.parametrize("gdt,tdt", [(np.float16, np.float16), (np.float32, np.float32),
                                     (np.float64, np.float64), (np.float16, np.float32),
                                     (np.float32, np.float64)])
def test_compare_max_rel_err_is_msprobes(name, gdt, tdt, tmp_path):
    g64, t64 = _pairs()[name]
    g, t = g64.astype(gdt), t64.astype(tdt)
    gp = write_bin(tmp_path / "g.bin", g, CODES[gdt])
    tp = write_bin(tmp_path / "t.bin", t, CODES[tdt])
    m = metrics.file_metrics(str(gp), str(tp), np.dtype(tdt).name, None, None)
    want = max_relative_err(g, t)
    assert m["max_rel_err"] == pytest.approx(want, rel=1e-12, abs=0)
    # the atol-floored relative error keeps its own name
    d = np.abs(t.astype(np.float64) - g.astype(np.float64))
    floored = float((d / np.maximum(np.abs(g.astype(np.float64)), m["atol"] or 1e-30)).max())
    assert m["max_rel_err_atol"] == pytest.approx(floored, rel=1e-12, abs=0)


def test_bf16_max_rel_err_is_msprobes(tmp_path):
    """bf16 is float32 to msProbe (its values widened), so float32 arithmetic."""
    g64, t64 = _pairs()["spread"]
    g32, t32 = g64.astype(np.float32), t64.astype(np.float32)
    gb, tb = (a.view(np.uint32) >> 16 for a in (g32, t32))
    gp = write_bin(tmp_path / "g.bin", gb.astype(np.uint16).tobytes(), 27, g32.shape)
    tp = write_bin(tmp_path / "t.bin", tb.astype(np.uint16).tobytes(), 27, t32.shape)
    widen = [(b.astype(np.uint32) << 16).view(np.float32) for b in (gb, tb)]
    m = metrics.file_metrics(str(gp), str(tp), "bf16", None, None)
    assert m["max_rel_err"] == pytest.approx(max_relative_err(*widen), rel=1e-12, abs=0)


@pytest.mark.parametrize("kernel", [True, False])
def test_replay_max_rel_err_is_the_same_formula(kernel, monkeypatch):
    """Both of replay's paths (the kernel's, and numpy's for a slice the kernel does
    not pass) give max_rel_err against the float64 reference by msProbe's formula."""
    g64, t64 = _pairs()["spread"]
    dumped = t64.astype(np.float16)
    judge = OutputJudge(dumped, "float16")
    if not kernel:
        monkeypatch.setattr(judge, "kind", None)
    judge.add(g64)
    out = judge.result()
    assert out["max_rel_err"] == pytest.approx(max_relative_err(g64, dumped), rel=1e-12, abs=0)
