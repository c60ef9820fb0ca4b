"""Whether a config file may be trusted, checked on the open file.

Whoever can write the config decides what is copied out of the service, so
(as msProbe does) a config is refused when it is a symbolic link, when its
group or others may write it, or when it belongs to someone other than the
user running the check (or root). The file is opened without following a
link and judged by fstat, so it cannot be swapped between check and read.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class FileRefused(Exception):
    """The config path holds something not to read; `problem` says why and what to do."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def file_kind(mode: int) -> str | None:
    """What a file of this mode is ("a FIFO", ...), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def kind_problem(mode: int) -> str | None:
    kind = file_kind(mode)
    return f"is {kind}, not a config file; replace it with a JSON or YAML file" if kind else None


def open_regular(path: str | os.PathLike, follow: bool = True) -> int:
    """A read-only fd of a regular file, opened without blocking: a FIFO or a
    device in its place is refused (FileRefused saying what it is), never waited
    on. OSError if it cannot be opened."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        kind = file_kind(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if kind:
        os.close(fd)
        raise FileRefused(f"is {kind}, not a regular file")
    return fd


def trust_problem(st: os.stat_result, path: str | os.PathLike) -> str | None:
    """Why a regular file with this status must not be used as a config, or None."""
    quoted = shlex.quote(os.fsdecode(path))
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        you = "you (root)" if me == 0 else f"you (uid {me}) or root"
        return (f"belongs to uid {st.st_uid}, not to {you}: its owner "
                "decides what is dumped; take it over with "
                f"`chown {me} {quoted}` or use a copy of your own")
    writers = [who for who, bit in (("its group", stat.S_IWGRP), ("others", stat.S_IWOTH))
               if st.st_mode & bit]
    if writers:
        return (f"can be written by {' and '.join(writers)} (mode "
                f"{stat.S_IMODE(st.st_mode):04o}): anyone who can write it decides what is "
                f"copied out of the service; run `chmod go-w {quoted}`")
    return None


def open_config(path: str | os.PathLike) -> int:
    """A read-only fd of the config after the checks above. Raises FileNotFoundError
    (no file: asleep), FileRefused, or OSError (cannot be opened)."""
    try:
        # O_NONBLOCK: opening a FIFO put in the config's place must not hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            target = os.fsdecode(os.readlink(path))
            copy = shlex.quote(os.fsdecode(os.path.realpath(path)))
            raise FileRefused(
                f"is a symbolic link (to {target}): a config must be a file of its own; "
                "replace the link with a copy of its target "
                f"(`cp --remove-destination {copy} {shlex.quote(os.fsdecode(path))}`)"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        problem = kind_problem(st.st_mode) or trust_problem(st, path)
    except BaseException:
        os.close(fd)
        raise
    if problem:
        os.close(fd)
        raise FileRefused(problem)
    return fd
