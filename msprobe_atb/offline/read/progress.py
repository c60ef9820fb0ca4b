"""The offline commands' progress bar (stats, compare, convert, report, replay)."""

from __future__ import annotations

import sys


class _Hidden:
    """The bar where stderr is not a terminal: nothing to draw, and tqdm's
    import (~25 ms of a command's CPU) not paid for it."""

    total: int | None = None

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Hidden:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress_bar(desc: str, unit: str = "file", total: int | None = None):
    """A progress bar on stderr (hidden when it is not a terminal) that stays
    on screen when done, so the user sees what ran and how long it took."""
    if not sys.stderr.isatty():
        return _Hidden()
    from tqdm import tqdm
    return tqdm(desc=desc, unit=unit, total=total, file=sys.stderr, leave=True)
