"""The offline commands' progress bar (stats, compare, convert, report, replay)."""

from __future__ import annotations

import sys


def progress_bar(desc: str, unit: str = "file", total: int | None = None):
    """A progress bar on stderr (hidden when it is not a terminal) that stays
    on screen when done, so the user sees what ran and how long it took."""
    from tqdm import tqdm
    return tqdm(desc=desc, unit=unit, total=total, disable=None, file=sys.stderr, leave=True)
