"""exec_range "next" / "next:N" made concrete when the control plane publishes.

Rounds are ATB's execution counts, one per model (prefill and decode count apart).
Each shim counts, per model it runs, the executions begun (`started`, control.h
struct msp_proc_model) and ended (`executed`). An awake process sees executions
begin (flag MSP_PROC_MODELS_EXACT): its next one is round `started`. An asleep one
counts them at their end only, so one may be under way unseen: its first round
surely begun after the publish is `executed + 1`. The next N executions of a model
are N rounds from the highest of these among the live processes, so every rank
dumps the same rounds. A model no live process has run yet is not named: its ops
keep the config's default, their first N rounds.

An execution can begin between reading the counts and the publish; the
controller then reads again and publishes again (`settle`), so an execution
begun before the shims applied the edit is never one of the N (it would be
dumped in part).
"""

from __future__ import annotations

from collections.abc import Callable

from msprobe_atb.control.block import PROC_MODELS_EXACT
from msprobe_atb.control.liveness import is_alive

MAX_MODELS = 8  # control.h MSP_MAX_MODELS
SETTLE_TRIES = 5


def next_rounds(block, n: int) -> tuple[tuple[str, int, int], ...]:
    """(model, first round, last round) of the next n executions of each model."""
    started: dict[str, int] = {}
    for s in block.procs():
        if s.exited or not is_alive(s.pid, s.start_ns):
            continue
        exact = bool(s.flags & PROC_MODELS_EXACT)
        for name, begun, ended in s.models:
            started[name] = max(started.get(name, 0), begun if exact else ended + 1)
    return tuple((name, first, first + n - 1)
                 for name, first in sorted(started.items()))[:MAX_MODELS]


def settle(block, n: int, publish: Callable[[tuple], None]) -> tuple[tuple[str, int, int], ...]:
    """Publishes the next rounds until the counts read after a publish still give
    the same rounds (no execution began in between); returns what is in force."""
    rounds = next_rounds(block, n)
    for _ in range(SETTLE_TRIES):
        publish(rounds)
        again = next_rounds(block, n)
        if again == rounds:
            break
        rounds = again
    return rounds
