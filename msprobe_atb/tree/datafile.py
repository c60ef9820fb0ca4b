"""Opening the files a dump (or a user) names for reading: regular files only, never
waited on.

A `.bin`, an `op_param.json`, a CSV, a mapping file: each is opened with
O_NONBLOCK and judged by fstat before a byte is read, so a FIFO, a device or a
socket put in its place is refused by name (NotRegular, an OSError whose
strerror says what it is) instead of blocking the reader in open or read
forever. A small file is read whole only up to a size bound (TooLarge).
"""

from __future__ import annotations

import errno
import os
from typing import BinaryIO

from msprobe_atb.config.filecheck import FileRefused, file_kind, open_regular
from msprobe_atb.tree.names import text_of


class NotRegular(OSError):
    """Not a regular file; strerror says what it is ("is a FIFO, not a regular file")."""


class TooLarge(ValueError):
    """A file larger than what its kind needs; the message names it and the bound."""


def open_data(path: str | os.PathLike, buffering: int = -1, follow: bool = True) -> BinaryIO:
    """The file opened for binary reading (a symbolic link refused unless `follow`);
    NotRegular (or OSError) otherwise."""
    try:
        fd = open_regular(path, follow)
    except FileRefused as e:
        raise NotRegular(errno.EINVAL, e.problem, os.fspath(path)) from None
    return os.fdopen(fd, "rb", buffering=buffering)


def read_bounded(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The whole of a file of at most `limit` bytes; TooLarge naming `what` beyond."""
    with open_data(path) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise TooLarge(f"{text_of(os.fsdecode(path))}: {what} of {max(size, len(data))} bytes is "
                       f"larger than the {limit} bytes one can be; refused")
    return data


def not_regular(path: str | os.PathLike) -> str:
    """What a path that is not a regular file is, as a refusal says it."""
    try:
        return f"is {file_kind(os.stat(path).st_mode)}, not a regular file"
    except OSError as e:
        return f"cannot be read: {e.strerror}"


MAX_SMALL = 1 << 20  # a marker, a manifest's meta, an op_param.json: a few KiB
MAX_INFO = 256 << 20  # a graph or model of info/: an 80-layer model's is a few MiB


def read_small(path: str | os.PathLike, what: str, limit: int = MAX_SMALL) -> bytes:
    """read_bounded for the small files of a dump (markers, meta, info JSON)."""
    return read_bounded(path, limit, what)
