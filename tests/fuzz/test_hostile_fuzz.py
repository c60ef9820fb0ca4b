"""The short run of the hostile-inputs fuzzer in `make test` (the long one is `make
fuzz`): the same properties on a fixed set of inputs."""

from __future__ import annotations

import pytest
from hostile_fuzz import run
from hypothesis_run import run_short

SHORT = {"mapping-yaml": 30, "query-sql": 20, "safetensors": 4, "nonregular-files": 2,
         "nonregular-user-files": 2}


@pytest.mark.parametrize("target", sorted(SHORT))
def test_hostile_inputs_are_refused_by_name(target):
    run_short(run, target, SHORT[target])
