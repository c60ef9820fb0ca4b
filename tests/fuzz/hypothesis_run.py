"""Running one fuzz property under Hypothesis, as every Python fuzzer here does."""

from __future__ import annotations

from collections.abc import Callable

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
