"""Option types shared by the commands: durations that are numbers a clock can reach."""

from __future__ import annotations

import argparse
import math


def _duration(text: str, zero_ok: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and (value > 0 or (zero_ok and value == 0)):
        return value
    least = "0 or more" if zero_ok else "more than 0"
    raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds; give a finite "
                                     f"number {least}, e.g. 30 or 0.5")


def seconds(text: str) -> float:
    """A duration > 0 (a timeout, an interval); nan, inf and negatives are refused."""
    return _duration(text, zero_ok=False)


def seconds_or_zero(text: str) -> float:
    """A duration >= 0 (0: do not wait)."""
    return _duration(text, zero_ok=True)
