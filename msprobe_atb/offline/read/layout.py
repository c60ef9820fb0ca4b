"""Finding the parts of a dump tree (contracts §2) from any directory a user names:
the output root, `atb_dump_data`, `data/`, a `{dev}_{pid}` dir, a round dir, or a
copied round dir that only holds `statistic.csv` and the tensor folders."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

DEV_PID = re.compile(r"^(-?\d+)_(\d+)$")
ROUND = re.compile(r"^\d+$")


@dataclass
class RoundDir:
    path: Path
    dev_pid: str  # "{dev}_{pid}" from the tree, or "" if the dir was moved out of it
    round: int | None

    @property
    def csv(self) -> Path:
        return self.path / "statistic.csv"

    @property
    def extra_csv(self) -> Path:
        return self.path / "statistic_extra.csv"


@dataclass
class DumpLayout:
    given: Path
    root: Path | None  # the `atb_dump_data` dir, when the given dir lies inside one
    rounds: list[RoundDir] = field(default_factory=list)
    dev_pids: set[str] | None = None  # the processes in scope (None: all)
    # process and round dirs that are symbolic links: not read (the probe makes
    # none; one could add another dump's rows), each named here
    refused: list[str] = field(default_factory=list)

    @property
    def info(self) -> Path | None:
        return self.root / "info" if self.root else None


class DumpNotFound(FileNotFoundError):
    pass


def _real_dirs(parent: Path, name: re.Pattern, refused: list[str]) -> list[Path]:
    """The subdirs of `parent` whose names match; symbolic links are refused."""
    out = []
    for p in parent.iterdir():
        if name.match(p.name) and p.is_dir():
            if p.is_symlink():
                refused.append(f"{p}: a symbolic link (to {os.path.realpath(p)}), not a "
                               "directory of this dump; not read")
            else:
                out.append(p)
    return out


def _round_dirs(proc: Path, refused: list[str]) -> list[RoundDir]:
    out = [RoundDir(p, proc.name, int(p.name)) for p in _real_dirs(proc, ROUND, refused)]
    return sorted(out, key=lambda r: r.round)


def _procs(data: Path, refused: list[str]) -> list[Path]:
    if not data.is_dir():
        return []
    return sorted(_real_dirs(data, DEV_PID, refused))


def find_layout(path: str | Path) -> DumpLayout:
    """Classify `path` and list the round dirs in scope; raises DumpNotFound with a hint."""
    p = Path(path).expanduser().resolve()
    if not p.is_dir():
        raise DumpNotFound(f"{p}: not a directory; give the output root, atb_dump_data, "
                           "data/, a {dev}_{pid} dir or a round dir")
    if (p / "atb_dump_data").is_dir():
        p = p / "atb_dump_data"
    refused: list[str] = []
    if (p / "data").is_dir() and p.name != "data":
        lay = DumpLayout(p, p, refused=refused)
        for proc in _procs(p / "data", refused):
            lay.rounds += _round_dirs(proc, refused)
        return lay
    if (p.name == "data" and p.parent.name == "atb_dump_data") or _procs(p, []):
        root = p.parent if p.parent.name == "atb_dump_data" else None
        lay = DumpLayout(p, root, refused=refused)
        for proc in _procs(p, refused):
            lay.rounds += _round_dirs(proc, refused)
        return lay
    if DEV_PID.match(p.name):
        root = p.parent.parent if p.parent.name == "data" else None
        return DumpLayout(p, root, _round_dirs(p, refused), {p.name}, refused)
    if ROUND.match(p.name) and DEV_PID.match(p.parent.name):
        root = p.parent.parent.parent if p.parent.parent.name == "data" else None
        return DumpLayout(p, root, [RoundDir(p, p.parent.name, int(p.name))], {p.parent.name})
    if (p / "statistic.csv").is_file() or any(p.glob("*/before")) or any(p.glob("*/after")):
        return DumpLayout(p, None, [RoundDir(p, "", None)])
    raise DumpNotFound(f"{p}: no dump found (no atb_dump_data/, data/, {{dev}}_{{pid}}/ or "
                       "round dir with statistic.csv or op folders)")
