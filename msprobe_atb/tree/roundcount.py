"""The round dirs of a dump, counted from data/: how many, how many marked complete,
and how many of the open ones belong to processes that ended."""

from __future__ import annotations

import os
from collections.abc import Set
from pathlib import Path


def round_counts(dump_root: Path, running: Set[int] = frozenset()) -> tuple[int, int, int]:
    """(round dirs, of them marked complete, of the open ones those whose process
    is not in `running`: ended, so no longer what keeps them open)."""
    rounds = complete = ended = 0
    data = dump_root / "data"
    try:
        procs = list(os.scandir(data))
    except OSError:
        return 0, 0, 0
    for proc in procs:
        if not proc.is_dir(follow_symlinks=False):
            continue
        pid = proc.name.rpartition("_")[2]
        gone = not (pid.isdigit() and int(pid) in running)
        for rnd in os.scandir(proc.path):
            if rnd.is_dir(follow_symlinks=False):
                rounds += 1
                marked = os.path.exists(os.path.join(rnd.path, "ROUND_COMPLETE.json"))
                complete += marked
                ended += gone and not marked
    return rounds, complete, ended
