"""The short run of the offline readers' fuzzer in `make test` (the long one is
`make fuzz`): the same properties on a fixed set of inputs."""

from __future__ import annotations

import pytest
from hypothesis_run import run_short
from reader_fuzz import run

SHORT = {"incident-files": 60, "nonutf8-names": 4}


@pytest.mark.parametrize("target", sorted(SHORT))
def test_dump_data_does_not_steer_the_readers(target):
    run_short(run, target, SHORT[target])
