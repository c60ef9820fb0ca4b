"""Fixtures for the control-plane tests (helpers live in cp_helpers.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from cp_helpers import DaemonProc, FakeShim

REPO = Path(__file__).resolve().parents[2]
# offline_helpers.make_real_dump: the stand-in under the real probe, for real record logs
sys.path.insert(0, str(REPO / "tests" / "offline"))


@pytest.fixture
def out_dir(tmp_path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


@pytest.fixture
def shims():
    made: list[FakeShim] = []

    def make(output: Path, **kw) -> FakeShim:
        s = FakeShim(output, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


@pytest.fixture
def daemon_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MSPROBE_ATB_") and k not in ("LD_PRELOAD", "ATB_OUTPUT_DIR",
                                                             "ATB_DUMP_CONFIG")}
    env["MSPROBE_ATB_IDLE_EXIT_S"] = "30"
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture
def daemons():
    made: list[DaemonProc] = []

    def start(output: Path, config: Path | None, env: dict[str, str]) -> DaemonProc:
        d = DaemonProc(output, config, env)
        made.append(d)
        return d

    yield start
    for d in made:
        d.kill()
