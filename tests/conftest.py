"""Shared paths to the build artifacts. Component fixtures live in each
test folder's own conftest.py.

`make pytest` runs the tests on PYTEST_WORKERS pytest-xdist workers with `--dist
loadfile`: a module's tests run in one worker, so its module-scoped fixtures are
built once. Session-scoped fixtures are built once per worker that needs them, except those
built with built_once.py, made once for all workers."""

from __future__ import annotations

import os
import sys

import pytest
from testkit import ABIS

# One BLAS thread per process: the pytest-xdist workers already fill the cores, and
# OpenBLAS's threads spinning for a core another worker holds made the replay
# references' float64 products (bisect, replay, compare) three times as slow.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "long: a module taking tens of seconds (its fixtures "
                            "or its tests): started first")


def pytest_collection_modifyitems(items) -> None:
    """The modules marked `long` first: --dist loadfile hands the modules out in
    collection order, so a long one collected last ended the run alone on its worker.
    Whole modules move; the order of the tests inside one is kept."""
    items.sort(key=lambda item: item.getparent(pytest.Module).get_closest_marker("long") is None)


@pytest.fixture(params=ABIS, ids=lambda a: f"abi{a}")
def abi(request) -> int:
    return request.param


@pytest.fixture
def clean_env() -> dict[str, str]:
    """The test process's environment without any probe variables, plus the
    venv's Python for the shim to start the daemon with."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LD_PRELOAD", "ATB_OUTPUT_DIR", "ATB_DUMP_CONFIG")
        and not k.startswith("MSPROBE_ATB_")
    }
    env["MSPROBE_ATB_PYTHON"] = sys.executable
    return env

