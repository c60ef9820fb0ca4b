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


def test_earlier_runs_dirs_stay_until_the_bench_ends(tmp_path, monkeypatch):
    """settle(): a finished run's dir is kept while the disk has room (removing it
    would slow the next run's file creation for minutes) and removed first when
    the disk runs short; removed() takes the rest at the end."""
    from bench import loadgen_run

    kept, short = tmp_path / "kept", tmp_path / "short"
    for d in (kept, short):
        (d / "out").mkdir(parents=True)
    monkeypatch.setattr(loadgen_run, "_finished", [kept])
    monkeypatch.setattr(loadgen_run, "KEEP_FREE", 0)
    assert loadgen_run.settle()[1] is False and kept.exists()
    loadgen_run._finished.append(short)
    monkeypatch.setattr(loadgen_run, "KEEP_FREE", 1 << 62)
    assert loadgen_run.settle()[1] is True and not kept.exists() and not short.exists()
    loadgen_run._finished.append(kept)
    (kept / "out").mkdir(parents=True)
    loadgen_run.removed()
    assert not kept.exists() and not loadgen_run._finished
