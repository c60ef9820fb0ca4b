"""Building a torch dump's derived files from its record logs: `rebuild`, under
the daemon lock, as the control plane would."""

from __future__ import annotations

import os
from pathlib import Path


def build_tree(dump_root: Path) -> str | None:
    """Builds statistic.csv, info/, markers and manifest; None when done, else
    what is missing, in words (a live daemon builds it instead; a full disk)."""
    from msprobe_atb.tree.drain import rebuild

    lock = _lock(dump_root)
    if lock is None:
        return ("a control-plane daemon runs in this dump root; it builds statistic.csv "
                "and info/ of this dump too")
    try:
        builder = rebuild(dump_root)
    finally:
        os.close(lock)
    problem = builder.unwritten_summary() or builder.progress_error
    return f"derived files NOT complete: {problem}" if problem else None


def _lock(dump_root: Path) -> int | None:
    """The daemon lock, or None while a daemon holds it. With no control block no
    daemon runs here: the holder is another torch process of this dump (a forked
    child, its parent) building it, whose build ends; it is waited for."""
    from msprobe_atb.control.lockfile import try_lock
    from msprobe_atb.control.probefiles import has_control_block

    lock = try_lock(dump_root)
    while lock is None and not has_control_block(dump_root):
        lock = try_lock(dump_root)
    return lock
