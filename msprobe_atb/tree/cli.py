"""`msprobe-atb rebuild DIR`: rebuild the derived files from the record logs."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from msprobe_atb.control.liveness import pid_alive
from msprobe_atb.control.lockfile import try_lock
from msprobe_atb.control.probefiles import has_control_block
from msprobe_atb.tree.fsio import sweep_stale_temps
from msprobe_atb.tree.records import records_dir


def output_dir_arg(p: argparse.ArgumentParser) -> None:
    """The DIR argument of the commands that act on one output dir."""
    p.add_argument("dir", nargs="?", default=os.environ.get("ATB_OUTPUT_DIR") or ".",
                   help="output root or its atb_dump_data directory "
                        "(default: $ATB_OUTPUT_DIR or the current directory)")


def find_dump_root(path: str | os.PathLike) -> Path:
    """Accepts an output root (containing atb_dump_data) or the dump root itself."""
    p = Path(os.path.abspath(path))
    if (p / "atb_dump_data").is_dir() and not (p / ".probe").is_dir():
        return p / "atb_dump_data"
    return p


def no_control_block(path: str | os.PathLike, dump_root: Path) -> str | None:
    """Why `status`/`wait` cannot read DIR, in words a user can act on; None if they can."""
    if has_control_block(dump_root):
        return None
    if not os.path.isdir(path):
        return (f"{path}: no such directory; give the --output dir that load_atb_probe.sh "
                "(or `msprobe-atb run`) was given")
    return (f"{dump_root}: no control block: no process has attached to this output dir "
            "(load the probe with load_atb_probe.sh and start the service)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="rebuild statistic.csv, info/ and markers from the "
                       "record logs (after a crash or a killed daemon)",
                       description="Rebuild every derived file (statistic.csv, "
                       "statistic_extra.csv, ROUND_COMPLETE.json, info/layer, info/model, "
                       "info/overflow) from <dump root>/.probe/records. The result is the same "
                       "as the live daemon's.")
    output_dir_arg(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dump_root = find_dump_root(args.dir)
    if not records_dir(dump_root).is_dir():
        print(f"{dump_root}: no record logs (.probe/records); nothing to rebuild", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="msprobe-atb: %(message)s")
    from msprobe_atb.tree.drain import rebuild

    try:
        lock = try_lock(dump_root)
    except OSError as exc:
        print(f"{dump_root}: {exc.strerror}", file=sys.stderr)
        return 2
    if lock is None:
        print(f"{dump_root}: a control-plane daemon is running and keeps the tree up to date; "
              "nothing to do (stop the service, or wait for the daemon to exit)", file=sys.stderr)
        return 1
    block = None
    try:
        try:
            from msprobe_atb.control.block import ControlBlock, ControlError

            block = ControlBlock(dump_root, create=False)
        except (ControlError, OSError):
            block = None  # without a block, only /proc tells which processes still run
        builder = rebuild(dump_root, block)
        swept = sweep_stale_temps(dump_root, pid_alive)
    finally:
        if block is not None:
            block.close()
        os.close(lock)
    complete = builder.round_count() - builder.pending_markers()
    summary = builder.unwritten_summary()
    if summary or builder.progress_error:
        from msprobe_atb.tree.progress import unwritten_text

        print(f"{dump_root}: the tree is NOT complete: "
              + "; ".join(x for x in (unwritten_text(summary) if summary else "",
                                      builder.progress_error) if x), file=sys.stderr)
        return 1
    print(f"{dump_root}: rebuilt {builder.round_count()} rounds ({complete} complete) "
          f"from {len(builder.procs)} processes"
          + (f"; removed {swept} temporary files left by killed processes" if swept else ""))
    return 0
