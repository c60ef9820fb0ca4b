"""Shared paths to the build artifacts. Component fixtures live in each
test folder's own conftest.py.

`make pytest` runs the tests on two pytest-xdist workers with `--dist loadgroup`.
Every test module is one group (pytest_collection_modifyitems below), so a module's
tests run in one worker and its module-scoped fixtures are built once; a test may
name another group with `pytest.mark.xdist_group` (tests that need the machine
to themselves share the group "alone"). Session-scoped fixtures are built once per
worker that needs them."""

from __future__ import annotations

import os
import sys

import pytest
from testkit import ABIS


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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items) -> None:
    """Each test without an xdist_group mark joins its module's group: pytest-xdist's
    loadgroup then keeps a module in one worker (as loadfile does) while the marked
    tests gather across modules."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
