"""The short run of the hostile-scheduler fuzzer in `make test` (the long one is
`make fuzz`): a fixed set of addresses and loopback servers, each refused in
one line within the connect timeout."""

from __future__ import annotations

from scheduler_fuzz import run

SHORT = 60


def test_every_hostile_scheduler_endpoint_is_refused_in_one_line():
    tried, findings = run(SHORT, derandomize=True)
    assert tried >= SHORT
    if findings:
        raise findings[0]
