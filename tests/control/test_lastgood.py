"""The last good config across daemon restarts, on the
Controller with a real control block: what a fresh daemon publishes when it
finds the config file rejected."""

from __future__ import annotations

import json
import os

import pytest

from msprobe_atb.config.compile import ASLEEP
from msprobe_atb.control.block import ControlBlock
from msprobe_atb.daemon.controller import Controller
from msprobe_atb.tree import lastgood

GOOD = json.dumps({"dump_enable": True, "exec_range": "all", "ids": "2"}).encode()
BAD = b'{"dump_enable": true, "filter_level": 7}'


@pytest.fixture
def block(tmp_path):
    with ControlBlock(tmp_path / "atb_dump_data", create=True) as b:
        yield b


def _fresh(block, cfg, data):
    """A new daemon's controller seeing `data` as its first look at the file."""
    c = Controller(block, cfg)
    c.apply(data)
    return block.read_config()[1]


def test_a_fresh_daemon_keeps_the_last_good_config(block, tmp_path):
    cfg = tmp_path / "config.json"
    Controller(block, cfg).apply(GOOD)
    now = _fresh(block, cfg, BAD)
    assert (now.state, now.ids) == (1, ("2",))
    assert "filter_level" in block.error
    assert _fresh(block, tmp_path / "other.json", BAD) == ASLEEP  # another config file


def test_a_tampered_or_removed_copy_is_not_used(block, tmp_path):
    cfg = tmp_path / "config.json"
    Controller(block, cfg).apply(GOOD)
    kept = block.dump_root / ".probe" / lastgood.NAME
    kept.chmod(0o666)
    assert _fresh(block, cfg, BAD) == ASLEEP
    kept.chmod(0o600)
    kept.rename(kept.with_name("elsewhere"))
    kept.symlink_to(kept.with_name("elsewhere"))
    assert _fresh(block, cfg, BAD) == ASLEEP
    kept.unlink()
    c = Controller(block, cfg)
    c.apply(GOOD)
    assert kept.exists() and os.stat(kept).st_mode & 0o022 == 0
    c.missing()  # the file deleted: asleep, for the next daemon too
    assert not kept.exists()
    assert _fresh(block, cfg, BAD) == ASLEEP
