"""bench serve_pace at a tiny size, with the real service, shim and daemon:
its figures come out, every round is built and `wait` succeeds (the time it
took is the bench's to judge, not a test's)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import serve_pace  # noqa: E402


def test_a_short_serve_run_builds_every_round_and_says_so():
    lines = list(serve_pace.run(seconds=2.0, every=1.0, settle=False))
    assert any(re.match(r"\s*\d+ s: [\d,]+ requests, made", line) for line in lines), lines
    m = re.search(r"wait returned [\d.]+ s after the stop \(exit (\d+)\); rounds built"
                  r" ([\d,]+) of ([\d,]+)", lines[-1])
    assert m, lines
    assert m.group(1) == "0" and m.group(2) == m.group(3) and m.group(2) != "0", lines
    assert "lost 0" in lines[-2], lines


def test_a_disk_running_short_stops_the_clients_and_says_so(monkeypatch):
    monkeypatch.setattr(serve_pace, "MIN_FREE", 1 << 62)  # short from the start
    lines = list(serve_pace.run(seconds=60.0, every=1.0, settle=False))
    assert any("GiB free on the dump's disk" in line and "the clients stop here" in line
               for line in lines), lines
    assert "stopped early for the disk" in lines[-2], lines
    m = re.search(r"rounds built ([\d,]+) of ([\d,]+)", lines[-1])
    assert m and m.group(1) == m.group(2), lines
