"""The ingest kernel's fuzzer: Hypothesis-made tensor records through the kernel and
the Python path, which must agree (ingest_properties.py). `make fuzz` runs it long
(`python tests/fuzz/ingest_fuzz.py`), `make test` briefly (test_ingest_fuzz.py);
prints "fuzz ingest-kernel: N inputs tried, K findings"."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from hypothesis_run import examples_main, run_property  # noqa: E402
from ingest_properties import INPUTS, kernel_lines_are_the_python_paths  # noqa: E402

TARGETS = ["ingest-kernel"]


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    assert name in TARGETS, name
    return run_property(kernel_lines_are_the_python_paths, INPUTS, examples, derandomize)


if __name__ == "__main__":
    raise SystemExit(examples_main(__doc__, TARGETS, run, 3000))
