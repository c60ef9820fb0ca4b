"""Fixtures for the native probe tests (helpers in probe_helpers.py)."""

from __future__ import annotations

import fcntl
import subprocess

import pytest
from probe_helpers import Dump, host_bin
from testkit import REPO, atbsim_bin, shim_lib, tmpfs_mounter


@pytest.fixture(scope="session", autouse=True)
def probe_built() -> None:
    """The shim and the hook host are built from the current sources (one make at a
    time: two pytest-xdist workers would otherwise both write the same objects)."""
    (REPO / "build").mkdir(exist_ok=True)
    with open(REPO / "build" / ".probe-make.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(["make", "-s", "-j2", "probe"], cwd=REPO, check=True,
                       capture_output=True)
    for abi in (0, 1):
        assert shim_lib(abi).exists() and host_bin(abi).exists()


@pytest.fixture(params=(0, 1), ids=lambda a: f"abi{a}")
def abi(request) -> int:
    return request.param


@pytest.fixture
def dump(tmp_path):
    d = Dump(tmp_path)
    yield d
    d.close()


@pytest.fixture
def need_atbsim(abi) -> None:
    if not atbsim_bin(abi).exists():
        pytest.skip("atbsim is not built (make native)")


@pytest.fixture
def tmpfs(tmp_path):
    """mount(size_kib, name) -> a tmpfs at tmp_path/name (skips without the right)."""
    yield from tmpfs_mounter(lambda: tmp_path)
