"""bench stats_pace's daemon-RSS figure: a daemon whose memory swings between
writes of the tree but does not grow meets the target by its floor, one that
grows does not, by either statistic."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.dump_progress import Sample  # noqa: E402
from bench.stats_pace import RSS_AT, Trace, _rss_figures  # noqa: E402


def trace(rss_mib) -> Trace:
    """Samples from RSS_AT[0] to RSS_AT[1] records built, RSS by sample index."""
    t = Trace("(c)")
    n = 400
    for i in range(n + 1):
        built = RSS_AT[0] + (RSS_AT[1] - RSS_AT[0]) * i // n
        t.samples.append(Sample(float(i), built={"log": built},
                                daemon_rss_kib=int(rss_mib(i) * 1024)))
    return t


def test_swings_without_growth_meet_the_target_by_the_floor():
    # 150 MiB between writes, 200 MiB at their top, three seconds in four at the top
    lines = _rss_figures(trace(lambda i: 150 if i % 4 == 0 else 200))
    verdict = lines[-1]
    assert "floor +0.0% (target within 10%: met)" in verdict, lines


def test_growth_fails_by_both():
    lines = _rss_figures(trace(lambda i: 150 + i * 0.2 + (50 if i % 4 else 0)))
    verdict = lines[-1]
    assert "median" in verdict and verdict.count("NOT met") == 2, lines


def test_a_run_too_short_for_two_windows_is_not_extrapolated():
    """Windows that share samples: their 2% of noise drawn out to 10M records read
    +193% in one run; no verdict is made from them."""
    t = Trace("(c)")
    for i in range(30):
        t.samples.append(Sample(float(i), built={"log": RSS_AT[0] + i * 15_000},
                                daemon_rss_kib=(130 + i % 3) * 1024))
    lines = _rss_figures(t)
    assert "no extrapolation" in lines[-1] and "NOT met" not in "".join(lines), lines


def test_one_warm_up_sample_does_not_decide_the_floor():
    """The first window starts with the records: a sample taken before the
    daemon reached its working size is its least, not its floor."""
    lines = _rss_figures(trace(lambda i: 110 if i == 0 else 150 if i % 4 == 0 else 200))
    assert "least 110.0" in lines[0] and "floor +0.0% (target within 10%: met)" in lines[-1], lines
