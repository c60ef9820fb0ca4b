"""The config fuzzer: each property of config_properties.py on Hypothesis-made
config files. `make fuzz` runs it long (`python tests/fuzz/config_fuzz.py`),
`make test` briefly (test_config_fuzz.py); each run prints per target the
inputs tried and the findings (distinct failures, each with its input)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from config_docs import placed_config_files  # noqa: E402
from config_properties import PLACEMENTS, PROPERTIES  # noqa: E402
from hypothesis_run import run_property, run_targets  # noqa: E402


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    """Tries `examples` inputs on one property; returns (inputs tried, findings)."""
    with tempfile.TemporaryDirectory(prefix=f"fuzz-config-{name}-") as d:
        prop = PROPERTIES[name](Path(d))
        try:
            return run_property(prop, placed_config_files(PLACEMENTS), examples, derandomize)
        finally:
            getattr(prop, "close", lambda: None)()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=10000, help="inputs per target")
    ap.add_argument("targets", nargs="*", default=list(PROPERTIES), help="default: all")
    args = ap.parse_args()
    return run_targets(args.targets, lambda name: run(name, args.examples), "config-{}")

if __name__ == "__main__":
    raise SystemExit(main())
