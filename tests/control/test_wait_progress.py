"""wait's progress line while the derived files are behind: the records behind,
the rate the control plane builds them (built.json's count between two looks),
the rate they are appended (the slots'), and the time left only where those
rates give one."""

from __future__ import annotations

from msprobe_atb.tree import lag
from msprobe_atb.wait import BuildRate, building_text

T0 = 1_700_000_000_000_000_000
BEHIND = lag.Lag([lag.LogLag("7-1.jsonl", 7, 9000, False, 1 << 20, T0)],
                 T0 + 12_500_000_000).view()
TEXT = "statistic.csv 9,000 records behind, the oldest 12 s ago"


def _status(built: int | None, appended: int) -> dict:
    return {"derived": {"built_records": built}, "processes": [{"records": appended}]}


def test_the_rates_are_measured_between_looks():
    rate = BuildRate()
    assert rate.look(_status(100, 200), 10.0) is None  # the first look: the baseline
    rate.start(_status(999, 999), 11.0)  # a baseline is there already: nothing changes
    assert rate.look(_status(1100, 300), 12.0) == (2.0, 500.0, 50.0)
    assert rate.look(_status(None, 300), 13.0) == (1.0, None, 0.0)  # built.json half written
    assert rate.look(_status(1200, 300), 14.0) == (1.0, None, 0.0)
    assert rate.look(_status(10, 300), 15.0) is None  # a new control plane starts over
    assert rate.look(_status(510, 300), 16.0) == (1.0, 500.0, 0.0)


def test_the_time_left_is_said_only_where_the_rates_give_it():
    assert building_text(BEHIND, None) == TEXT
    assert building_text(BEHIND, (2.0, 500.0, 50.0)) == (
        TEXT + "; building 500/s while 50/s are appended, about 20 s left")
    assert building_text(BEHIND, (5.0, 9800.0, 0.0)) == (
        TEXT + "; building 9,800/s, about 0.9 s left")
    assert building_text(BEHIND, (5.0, 0.0, 0.0)) == (
        TEXT + "; nothing built in the last 5 s: no estimate of the time left")
    assert building_text(BEHIND, (5.0, 40.0, 40.0)) == (
        TEXT + "; building 40/s while 40/s are appended: the backlog is not shrinking, no "
        "estimate of the time left")
    assert building_text(BEHIND, (5.0, None, 0.0)) == (
        TEXT + "; the building rate is not known (built.json does not count the records "
        "built): no estimate of the time left")
