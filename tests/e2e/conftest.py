"""End-to-end fixtures (helpers live in e2e_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_helpers import Service
from testkit import REPO


@pytest.fixture
def service_env(clean_env) -> dict[str, str]:
    env = dict(clean_env)
    env.pop("ATB_HOME_PATH", None)
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture
def services():
    made: list[Service] = []

    def start(out: Path, env: dict[str, str], devices: int = 2, abi: int = 0,
              extra: str = "", **kw) -> Service:
        s = Service(out, env, devices, abi, extra, **kw)
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop()
