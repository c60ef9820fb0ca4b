"""glibc's malloc settings for replay's processes (no-op under another allocator).

An op's float64 temporaries are megabytes each, made and freed slice after slice.
Their pages are what the settings trade: given back to the system (the command's
process, which outlives a replay) or kept for the next slice (a worker, which ends
with it)."""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters


def _mallopt(*settings: tuple[int, int]) -> None:
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: its allocator decides
        return
    for param, value in settings:
        mallopt(param, value)


def return_freed_arrays() -> None:
    """glibc raises its mmap threshold after the first large block is freed, and later
    ones then stay in the heap: the process kept 2 GiB for a layer whose largest op
    needs 0.5 GiB. A fixed 128 KiB threshold gives each freed array back."""
    _mallopt((M_MMAP_THRESHOLD, 128 << 10))


def keep_freed_arrays() -> None:
    """A worker's temporaries up to 32 MiB (glibc's largest threshold) come from its heap
    and stay there when freed, for the next slice to reuse: mapped afresh, each page of
    each one faulted in anew (a hidden-4096 layer: 660k page faults, 3 s of system
    time; kept: 50k)."""
    _mallopt((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30))
