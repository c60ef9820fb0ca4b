"""Fixtures of the adversarial tests (helpers in robust_helpers.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "e2e"))  # the e2e Service: atbsim serve the user's way

from robust_helpers import require_built  # noqa: E402


@pytest.fixture(autouse=True)
def _built() -> None:
    require_built()


def _mount(d: Path, size_kib: int) -> None:
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs",
                        str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up ({r.stderr.strip()}); "
                    "full-disk tests need root or CAP_SYS_ADMIN")


def _umount(d: Path) -> None:
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _mounter(base):
    """mount(size_kib) -> a fresh tmpfs below base() (skips if mounting is refused),
    yielded by a fixture that unmounts them all at teardown."""
    mounts: list[Path] = []

    def mount(size_kib: int, name: str = "fs") -> Path:
        d = base() / name
        _mount(d, size_kib)
        mounts.append(d)
        return d

    yield mount
    for d in mounts:
        _umount(d)


@pytest.fixture
def small_fs(tmp_path):
    """A fresh small tmpfs per test."""
    yield from _mounter(lambda: tmp_path)


@pytest.fixture(scope="module")
def module_fs(tmp_path_factory):
    """Like small_fs, shared by the tests of one module (one expensive scenario)."""
    yield from _mounter(lambda: tmp_path_factory.mktemp("mod"))


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
