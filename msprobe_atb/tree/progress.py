"""`.probe/built.json`: how far the derived files have got, for `msprobe-atb wait`.

Written by the daemon after each flush of the tree (and by `rebuild`): for every
record log, the byte offset up to which its records are in statistic.csv, info/
and the round markers, and whether its process was finished (exited or dead)
when the tree was written, plus the digest of the config content the daemon last
handled. A reader compares the offsets with the logs' sizes: equal means every
record written so far is in the derived files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_atb.tree import fsio

NAME = "built.json"


@dataclass
class Progress:
    daemon_pid: int = 0
    config_sha256: str | None = None  # None: no config file (or none handled yet)
    offsets: dict[str, int] = field(default_factory=dict)  # log file name -> bytes built
    finished: list[str] = field(default_factory=list)  # logs whose process was done

    def to_bytes(self) -> bytes:
        return json.dumps({"daemon_pid": self.daemon_pid, "config_sha256": self.config_sha256,
                           "offsets": self.offsets, "finished": sorted(self.finished)},
                          sort_keys=True).encode() + b"\n"


def path_of(dump_root: Path) -> Path:
    return dump_root / ".probe" / NAME


def write(dump_root: Path, progress: Progress) -> None:
    fsio.write_files(dump_root, [((".probe", NAME), progress.to_bytes())])


def read(dump_root: Path) -> Progress | None:
    """The last progress written, or None if there is none (or it is unreadable)."""
    try:
        raw = json.loads(path_of(dump_root).read_bytes())
        return Progress(int(raw.get("daemon_pid") or 0), raw.get("config_sha256"),
                        {str(k): int(v) for k, v in dict(raw.get("offsets") or {}).items()},
                        [str(x) for x in raw.get("finished") or []])
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def unbuilt(dump_root: Path, progress: Progress | None) -> list[str]:
    """Record logs with records that are not yet in the derived files."""
    from msprobe_atb.tree.records import list_logs

    offsets = progress.offsets if progress else {}
    out = []
    for _, log_path in list_logs(dump_root):
        try:
            size = os.stat(log_path).st_size
        except OSError:
            continue
        if offsets.get(log_path.name, -1) < size:
            out.append(log_path.name)
    return out
