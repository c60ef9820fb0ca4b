"""Fixtures of the offline tools: synthetic dumps (no native build needed) and
real dumps made by the stand-in ATB under the real probe (session-scoped; those
several modules read are made once for every pytest-xdist worker)."""

from __future__ import annotations

import shutil
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import offline_synth as synth  # noqa: E402
from built_once import built_once  # noqa: E402
from offline_helpers import (  # noqa: E402
    INJECT,
    MODEL,
    TRUTH_INJECT,
    TRUTH_LAYERS,
    TRUTH_MODEL,
    make_real_dump,
    need_real,
    side_by_side,
)


@pytest.fixture(scope="session")
def synth_pair(tmp_path_factory):
    """fp32 golden vs fp16 target with an Inf in 2_Layer/1_Linear at round 0."""
    d = tmp_path_factory.mktemp("synth")
    with np.errstate(all="ignore"):
        synth.small_model(d / "golden")
        synth.small_model(d / "target", dtype=np.float16, inject=(1, "Linear"), pid=99)
    return d / "golden", d / "target"


def real_dump_once(tmp_path_factory, name: str, dtype: str, **kw) -> Path:
    """One real dump (make_real_dump's `kw`) made once for the run (built_once)."""
    need_real()
    return built_once(tmp_path_factory, name,
                      lambda base: make_real_dump(base / name, dtype, **kw))


@pytest.fixture(scope="session")
def real_dumps(tmp_path_factory):
    """golden fp32, target fp16, and target fp16 with INJECT (all: task all,
    save_child true, filter_level 1, so some tensors are alias stubs)."""
    return {"golden": real_dump_once(tmp_path_factory, "golden", "fp32"),
            "target": real_dump_once(tmp_path_factory, "target", "fp16"),
            "injected": real_dump_once(tmp_path_factory, "injected", "fp16", inject=INJECT)}


@pytest.fixture(scope="session")
def overflow_dump(tmp_path_factory):
    """An overflow_check run of the injected model: the overflowing kernel is
    reported (info/overflow) and only its tensors are dumped."""
    return real_dump_once(tmp_path_factory, "overflow", "fp16", inject=INJECT,
                          task="overflow_check")


@pytest.fixture(scope="session")
def stats_dump(tmp_path_factory):
    """A statistics-only run of the injected model (no .bin files)."""
    return real_dump_once(tmp_path_factory, "stats", "fp16", inject=INJECT,
                          task="statistics")


@pytest.fixture(scope="session")
def stats_dump_3_layers(tmp_path_factory):
    """The statistics-only run of stats_dump's model with 3 layers instead of 2."""
    model = [*MODEL]
    model[model.index("--layers") + 1] = "3"
    return real_dump_once(tmp_path_factory, "stats3", "fp32", task="statistics", model=model)


@pytest.fixture(scope="session")
def all_stages_stats_dumps(tmp_path_factory):
    """Statistics-only runs saving all four stages: fp32 golden, fp16 target."""
    need_real()
    base = tmp_path_factory.mktemp("stages")
    yield side_by_side({dt: partial(make_real_dump, base / dt, dt, task="statistics",
                                    all_stages=True) for dt in ("fp32", "fp16")})
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def truth_dumps(tmp_path_factory):
    """Dumps with a known fault for the report's truth tests: a golden fp32 and a
    target fp16 run of TRUTH_MODEL (2 requests: prefill rounds 0-1, decode rounds
    0-3), each on devices 0 and 1, the target with TRUTH_INJECT (device 1 only);
    and a golden fp32 run with TRUTH_LAYERS - 1 layers."""
    need_real()
    base = tmp_path_factory.mktemp("truth")
    other = [*TRUTH_MODEL]
    other[other.index("--layers") + 1] = str(TRUTH_LAYERS - 1)
    yield side_by_side({
        "golden": partial(make_real_dump, base / "golden", "fp32", model=TRUTH_MODEL,
                          devices=(0, 1)),
        "target": partial(make_real_dump, base / "target", "fp16", model=TRUTH_MODEL,
                          devices=(0, 1), inject=TRUTH_INJECT),
        "other_layers": partial(make_real_dump, base / "other", "fp32", model=other)})
    shutil.rmtree(base, ignore_errors=True)
