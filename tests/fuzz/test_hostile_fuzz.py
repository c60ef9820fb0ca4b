"""The short run of the hostile-inputs fuzzer in `make test` (the long one is `make
fuzz`): the same properties on a fixed set of inputs."""

from __future__ import annotations

import pytest
from hostile_fuzz import run

SHORT = {"mapping-yaml": 30, "query-sql": 20, "safetensors": 4, "nonregular-files": 2,
         "nonregular-user-files": 2}


@pytest.mark.parametrize("target", sorted(SHORT))
def test_hostile_inputs_are_refused_by_name(target):
    tried, findings = run(target, SHORT[target], derandomize=True)
    assert tried >= SHORT[target]
    if findings:
        raise findings[0]
