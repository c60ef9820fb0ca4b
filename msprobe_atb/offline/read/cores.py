"""How many worker processes the offline commands start by default (compare's local
cluster, replay's workers): one per core this process may run on. Imports nothing
heavy, so a command line can offer it without loading numpy or polars."""

from __future__ import annotations

import os


def default_jobs() -> int:
    """One worker per core this process may run on (its CPU affinity, as a container or
    `taskset` sets it); -j overrides it."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity call on this platform
        return max(1, os.cpu_count() or 1)
