"""The benches' measure of a command (bench/common.py run_measured) is the command's
own: a bench that holds big arrays must not lend its peak RSS to what it measures."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import run_measured  # noqa: E402

HELD = 512 << 20


def test_a_commands_peak_rss_is_its_own():
    held = np.ones(HELD // 8)  # the bench's own memory, touched
    out, wall, cpu, rss_kib = run_measured(["--help"], ok=(0,))
    assert "stats" in out and wall > 0 and cpu > 0
    assert rss_kib * 1024 < HELD / 2, f"peak RSS {rss_kib} KiB: the bench's, not the command's"
    assert held.sum() == HELD // 8


def test_a_failing_command_is_said():
    try:
        run_measured(["stats", "/nonexistent/dump"], ok=(0,))
    except RuntimeError as exc:
        assert "stats /nonexistent/dump failed" in str(exc)
    else:
        raise AssertionError("a failing command passed")


def test_a_run_starts_once_earlier_runs_dirs_are_gone(tmp_path):
    """settle(): an earlier run's dir still being removed in the background is
    gone before the next run starts (its removal would weigh on that run)."""
    import threading
    import time

    from bench import loadgen_run

    gone = threading.Event()

    def remove():
        time.sleep(0.2)
        gone.set()

    t = threading.Thread(target=remove)
    t.start()
    loadgen_run._removing.append(t)
    assert loadgen_run.settle() >= 0 and gone.is_set() and not loadgen_run._removing
