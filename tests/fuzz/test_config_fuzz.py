"""The short run of the config fuzzer in `make test` (the long one is `make fuzz`):
the same properties on a fixed set of inputs, so CI catches a regression."""

from __future__ import annotations

import pytest
from config_fuzz import run
from config_properties import PROPERTIES
from hypothesis_run import run_short

SHORT = 100


@pytest.mark.parametrize("target", sorted(PROPERTIES))
def test_every_config_is_accepted_or_rejected_with_a_message(target):
    run_short(run, target, SHORT)
