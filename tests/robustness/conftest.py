"""Fixtures of the adversarial tests (helpers in robust_helpers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))  # the e2e Service: atbsim serve the user's way
sys.path.insert(0, str(HERE.parent / "control"))  # cp_helpers' DaemonProc: a daemon of our own

from robust_helpers import require_built  # noqa: E402
from testkit import tmpfs_mounter  # noqa: E402


@pytest.fixture(autouse=True)
def _built() -> None:
    require_built()


@pytest.fixture
def small_fs(tmp_path):
    """A fresh small tmpfs per test."""
    yield from tmpfs_mounter(lambda: tmp_path)


@pytest.fixture(scope="module")
def module_fs(tmp_path_factory):
    """Like small_fs, shared by the tests of one module (one expensive scenario)."""
    yield from tmpfs_mounter(lambda: tmp_path_factory.mktemp("mod"))


@pytest.fixture
def services():
    """start(out, devices=1, **env) -> an e2e Service (atbsim serve under the probe,
    started the user's way); every one is stopped at teardown."""
    from e2e_helpers import Service
    from robust_helpers import base_env

    made = []

    def start(out: Path, devices: int = 1, **env: str):
        e = base_env()
        e.update(env)
        made.append(Service(out, e, devices))
        return made[-1]

    yield start
    for s in made:
        s.stop()
