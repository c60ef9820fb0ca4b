"""The short run of the config fuzzer in `make test` (the long one is `make fuzz`):
the same properties on a fixed set of inputs, so CI catches a regression."""

from __future__ import annotations

import pytest
from config_fuzz import run
from config_properties import PROPERTIES

SHORT = 100


@pytest.mark.parametrize("target", sorted(PROPERTIES))
def test_every_config_is_accepted_or_rejected_with_a_message(target):
    tried, findings = run(target, SHORT, derandomize=True)
    assert tried >= SHORT
    if findings:
        raise findings[0]
