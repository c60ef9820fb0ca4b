"""Running one fuzz property under Hypothesis, as every Python fuzzer here does."""

from __future__ import annotations

import argparse
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy


def run_property(prop: Callable[..., None], inputs: SearchStrategy, examples: int,
                 derandomize: bool = False) -> tuple[int, list[BaseException]]:
    """Tries `examples` inputs (each passed as prop(*input) if a tuple, else prop(input));
    returns (inputs tried, findings: distinct failures, each shrunk to its smallest input)."""
    tried = 0

    @settings(max_examples=examples, database=None, deadline=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=True)
    @given(inputs)
    def check(value) -> None:
        nonlocal tried
        tried += 1
        prop(*value) if isinstance(value, tuple) else prop(value)

    try:
        check()
    except BaseExceptionGroup as group:  # several distinct bugs  # noqa: F821
        return tried, list(group.exceptions)
    except Exception as exc:  # one bug, shrunk to its smallest input
        return tried, [exc]
    return tried, []


def run_in_tmp(name: str, make: Callable[[Path], Callable[..., None]],
               inputs: SearchStrategy, examples: int,
               derandomize: bool = False) -> tuple[int, list[BaseException]]:
    """run_property of the property `make(dir)` makes in a temporary dir of its own."""
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as d:
        return run_property(make(Path(d)), inputs, examples, derandomize)


def run_targets(names: list[str], run_one: Callable[[str], tuple[int, list[BaseException]]],
                label: str = "{}") -> int:
    """Runs each target, prints its findings and "fuzz NAME: N inputs tried, K
    findings" (NAME: `label` with the target); the exit code: 1 on any finding."""
    total = 0
    for name in names:
        tried, findings = run_one(name)
        for exc in findings:
            traceback.print_exception(exc)
        print(f"fuzz {label.format(name)}: {tried} inputs tried, {len(findings)} findings",
              flush=True)
        total += len(findings)
    return 1 if total else 0


def run_short(run: Callable[..., tuple[int, list[BaseException]]], target: str,
              examples: int) -> None:
    """`make test`'s short run of one target: fixed inputs, the first finding raised."""
    tried, findings = run(target, examples, derandomize=True)
    assert tried >= examples
    if findings:
        raise findings[0]


def examples_main(doc: str, targets: list[str],
                  run: Callable[[str, int], tuple[int, list[BaseException]]],
                  default: int) -> int:
    """The command line of a fuzzer whose targets take a number of examples: runs the
    targets named (default: all) and prints their findings (run_targets)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--examples", type=int, default=default)
    ap.add_argument("targets", nargs="*", default=targets, help="default: all")
    args = ap.parse_args()
    return run_targets(args.targets, lambda name: run(name, args.examples))
