"""The short run of the native hook fuzzer in `make test` (the long one is
`make fuzz`): the same driver and checks, a few thousand calls, fixed seeds."""

from __future__ import annotations

import pytest
from native_fuzz import FUZZ_BIN, run

SHORT = 3000


@pytest.mark.parametrize("seed", [1])
def test_hostile_hook_calls_are_survived_and_accounted_for(seed):
    if not FUZZ_BIN.exists():
        pytest.skip(f"{FUZZ_BIN} is not built (make native-test)")
    tally: dict[str, int] = {}
    tried, findings = run(SHORT, seed, threads=2, tally=tally)
    assert not findings, "\n".join(findings)  # first: they say why a run came up short
    assert tried >= SHORT
    # the inputs reach every outcome: written, refused, and (seed-dependent) deduplicated
    assert tally.get("bin", 0) > 0 and tally.get("lost", 0) > 0, tally
