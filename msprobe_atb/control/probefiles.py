"""Opening the control plane's files under <dump_root>/.probe without following
links (a link planted at daemon.log, daemon.lock or .probe itself must
not lead a write outside the dump tree).

The opening is done by native/core/mechanisms/control.c, which the shim uses too, so both
sides refuse and replace the same things: the dump root and .probe are opened
with O_NOFOLLOW, and a symlink, hard link, FIFO or directory at one of our file
names is unlinked (never its target) and a fresh file created with O_EXCL.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from msprobe_atb.control.ext import ext


def resolve_dump_root(dump_root: str | os.PathLike) -> Path:
    """The dump root, absolute, with a symlink at its own name resolved (once:
    everything after opens below the resolved directory with O_NOFOLLOW)."""
    root = Path(os.path.abspath(dump_root))
    return Path(os.path.realpath(root)) if root.is_symlink() else root


def has_control_block(dump_root: Path) -> bool:
    """Whether a probe attached here: a torch dump has none (and so no daemon)."""
    return (Path(dump_root) / ".probe" / "control.block").exists()


def probe_dir_fd(dump_root: Path, create: bool = True) -> int:
    """A verified fd of <dump_root>/.probe (the caller closes it)."""
    ffi, lib = ext()
    err = ffi.new("char[]", 1024)
    fd = lib.msp_probe_dir_open(os.fsencode(resolve_dump_root(dump_root)), int(create), err, 1024)
    if fd < 0:
        code = ffi.errno or errno.EIO
        raise OSError(code, ffi.string(err).decode(errors="replace") or os.strerror(code))
    return fd


def open_probe_file(dump_root: Path, name: str, flags: int) -> tuple[int, bool]:
    """(fd, replaced) of <dump_root>/.probe/<name>, opened with `flags`
    (os.O_RDWR / O_WRONLY | O_APPEND, with O_CREAT to create); `replaced` says a
    link or non-regular file had to be removed from that name first."""
    ffi, lib = ext()
    dfd = probe_dir_fd(dump_root)
    try:
        replaced = ffi.new("int *")
        fd = lib.msp_probe_file_open(dfd, os.fsencode(name), flags, replaced)
        if fd < 0:
            code = ffi.errno or errno.EIO
            raise OSError(code, f"cannot open {dump_root}/.probe/{name}: {os.strerror(code)}")
        return fd, bool(replaced[0])
    finally:
        os.close(dfd)


def same_file(fd: int, dump_root: Path, name: str) -> bool:
    """Whether <dump_root>/.probe/<name> (not followed) is still the file of fd."""
    try:
        here = os.stat(Path(dump_root) / ".probe" / name, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)
