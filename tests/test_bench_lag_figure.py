"""bench stats_pace's lag figure: the target counts the records not in the
derived files, those still in the shims' queues included, in seconds of what
the producers made; the age of the oldest is said beside it, not judged."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dump_progress import Sample  # noqa: E402
from bench.stats_pace import Trace, _lag_figure  # noqa: E402

RATE = 60_000.0


def trace(*points: tuple[int, int, float]) -> Trace:
    """Samples of (records in the logs not built, records in the shims' queues, age)."""
    t = Trace("(c)")
    for i, (lag, queued, age) in enumerate(points):
        t.samples.append(Sample(float(i), produced={"log": lag}, queued=queued, age_s=age))
    return t


def test_a_lag_under_a_second_of_records_meets_the_target_whatever_its_age():
    lines = _lag_figure(trace((6_000, 0, 0.2), (30_000, 6_000, 1.3), (0, 0, 0.0)), RATE)
    assert "36,000 records not in the derived files (30,000 in the record logs, 6,000 in" \
        " the shims' queues) = 0.60 s" in lines[0], lines
    assert lines[0].endswith("(target <= 1 s of records: met)"), lines
    assert "1.3 s old at most (30,000 records behind then)" in lines[1], lines


def test_records_in_the_shims_queues_count_against_it():
    lines = _lag_figure(trace((40_000, 0, 0.5), (40_000, 30_000, 0.4)), RATE)
    assert "70,000 records" in lines[0] and lines[0].endswith("NOT met)"), lines
