"""`.probe/built.json`: how far the derived files have got, for `msprobe-atb wait`.

Written by the daemon after each flush of the tree (and by `rebuild`): for every
record log, the byte offset up to which its records are in statistic.csv, info/
and the round markers, and whether its process was finished (exited or dead)
when the tree was written, plus the digest of the config content the daemon last
handled. A reader compares the offsets with the logs' sizes: equal means every
record written so far has been handled; `unwritten` (a full disk) says which
derived files could not be written then, and how many rows they miss: those
records are in the logs only, until a later flush or `rebuild` writes them.

On a full disk the file is still kept current: it is padded with blanks to at
least PAD bytes, so a new version that finds no room for a new file overwrites
the old one in place, in the room it already has. A reader that catches such an
overwrite half done sees a `check` that does not match and reads it again later.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_atb.tree import fsio

NAME = "built.json"
PAD = 16 << 10  # room kept in the file for an overwrite in place (a full disk)


def _check(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    """What tells a config file's versions apart without reading it: ctime, mode and
    owner too (`chmod go-w` fixes a refused config without touching mtime)."""
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode, st.st_uid)


def refused_unread(key: tuple[int, ...] | None) -> str:
    """The handled-config token of a file refused without being read (a link, a file
    others may write, ...): its stat key, or 'unreadable' when even lstat failed."""
    return "stat:" + (",".join(map(str, key)) if key is not None else "unreadable")


def config_tokens(path: str) -> set[str | None]:
    """The tokens a daemon reports once it has handled the config file as it is now:
    the SHA-256 of its content, or refused_unread of its stat; None if it is missing."""
    try:
        key: tuple[int, ...] | None = stat_key(os.lstat(path))
    except FileNotFoundError:
        return {None}
    except OSError:
        key = None
    tokens: set[str | None] = {refused_unread(key)}
    try:
        with open(path, "rb") as f:
            tokens.add(hashlib.sha256(f.read()).hexdigest())
    except OSError:
        pass
    return tokens


@dataclass
class Progress:
    daemon_pid: int = 0
    # The config file the daemon handled last (applied or refused): config_tokens;
    # None: no config file (or none handled yet).
    config_sha256: str | None = None
    offsets: dict[str, int] = field(default_factory=dict)  # log file name -> bytes built
    finished: list[str] = field(default_factory=list)  # logs whose process was done
    # TreeBuilder.unwritten_summary(): files, csv_rows, manifest_rows, names, reason
    unwritten: dict | None = None
    # log file name -> the records (lines) in those bytes: against the slot's `records`
    # (lines the shim appended), how far behind the derived files are
    records: dict[str, int] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        doc = {"daemon_pid": self.daemon_pid, "config_sha256": self.config_sha256,
               "offsets": self.offsets, "records": self.records,
               "finished": sorted(self.finished)}
        if self.unwritten:
            doc["unwritten"] = self.unwritten
        data = json.dumps({**doc, "check": _check(doc)}, sort_keys=True).encode() + b"\n"
        return data.ljust(PAD)


def path_of(dump_root: Path) -> Path:
    return dump_root / ".probe" / NAME


def write(dump_root: Path, progress: Progress) -> None:
    """Replaces built.json; with no room for a new file, overwrites it in place."""
    data = progress.to_bytes()
    try:
        fsio.write_files(dump_root, [((".probe", NAME), data)])
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not fsio.overwrite_in_place(
                dump_root, (".probe", NAME), data):
            raise


def read(dump_root: Path) -> Progress | None:
    """The last progress written, or None if there is none (or it is unreadable)."""
    try:
        raw = json.loads(path_of(dump_root).read_bytes())
        check = raw.pop("check", None)
        if check is not None and check != _check(raw):
            return None  # caught while overwritten in place: read again later
        unwritten = raw.get("unwritten")
        return Progress(int(raw.get("daemon_pid") or 0), raw.get("config_sha256"),
                        {str(k): int(v) for k, v in dict(raw.get("offsets") or {}).items()},
                        [str(x) for x in raw.get("finished") or []],
                        unwritten if isinstance(unwritten, dict) else None,
                        {str(k): int(v) for k, v in dict(raw.get("records") or {}).items()})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def unwritten_text(unwritten: dict) -> str:
    """The derived files a full disk kept out, in words (no trailing period)."""
    def n(key: str) -> int:
        v = unwritten.get(key)
        return v if isinstance(v, int) and v > 0 else 0

    names = [str(x) for x in unwritten.get("names") or []][:3]
    files = n("files")
    parts = []
    if n("csv_rows"):
        parts.append(f"{n('csv_rows')} rows are missing from statistic.csv")
    if n("manifest_rows"):
        parts.append(f"{n('manifest_rows')} rows from the manifest")
    what = (f"{files} derived file(s) could not be written ({', '.join(names)}"
            f"{', ...' if files > len(names) else ''})" if files
            else "the manifest could not be written")
    return (f"{what}: {unwritten.get('reason') or 'unknown error'}"
            + (f"; {' and '.join(parts)}" if parts else "")
            + "; the record logs keep every record: `msprobe-atb rebuild` writes them once "
            "there is room")


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


def outdated(dump_root: Path, progress: Progress | None) -> list[str]:
    """`unbuilt`, and the logs of processes that ended after the tree was built
    (the markers of their last rounds wait for the end)."""
    from msprobe_atb.control.liveness import is_alive
    from msprobe_atb.tree.records import list_logs

    out = unbuilt(dump_root, progress)
    finished = set(progress.finished) if progress else set()
    return out + [path.name for key, path in list_logs(dump_root)
                  if path.name not in out and path.name not in finished
                  and not is_alive(key.pid, key.start_ns)]
