"""The CLI tests use a synthetic dump from the offline tools' generator."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "offline"))

import offline_synth as synth  # noqa: E402


@pytest.fixture(scope="session")
def synth_dump(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli") / "dump"
    synth.small_model(d)
    return d
