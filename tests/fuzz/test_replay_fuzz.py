"""The short run of replay's fuzzer in `make test` (the long one is `make fuzz`): the
same property on a fixed set of crafted ops."""

from __future__ import annotations

from hypothesis_run import run_short
from replay_fuzz import run

SHORT = 30


def test_crafted_ops_neither_crash_nor_blow_up_replay():
    run_short(run, "replay-ops", SHORT)
