"""Shared paths to the build artifacts. Component fixtures live in each
test folder's own conftest.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build"
ABIS = (0, 1)


def atb_home(abi: int) -> Path:
    """The stand-in ATB install for one libstdc++ ABI (ATB_HOME_PATH)."""
    return BUILD / "atbsim" / f"cxx_abi_{abi}"


def atbsim_bin(abi: int) -> Path:
    return atb_home(abi) / "bin" / "atbsim"


def shim_lib(abi: int) -> Path:
    return BUILD / "lib" / f"libatb_probe_abi{abi}.so"


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
