"""The short run of the ingest kernel's fuzzer in `make test` (the long one is
`make fuzz`): the same property on a fixed set of records."""

from __future__ import annotations

from hypothesis_run import run_short
from ingest_fuzz import run

SHORT = 500


def test_the_kernels_rows_are_the_python_paths():
    run_short(run, "ingest-kernel", SHORT)
