"""The short run of bisect's fuzzer in `make test` (the long one is `make fuzz`): the
same property on a fixed pair of seeded runs."""

from __future__ import annotations

import pytest
from bisect_fuzz import run
from hypothesis_run import run_short
from offline_helpers import need_real

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

SHORT = 2


def test_seeded_faults_are_found_within_the_bound():
    need_real()
    run_short(run, "bisect-cases", SHORT)
