"""Writing derived files safely under the dump root.

Every directory is opened one component at a time with O_NOFOLLOW from the
dump root, so no symlink and no `..` in a model-supplied name can lead outside
`atb_dump_data`. Files are written to a temporary name and renamed into place,
so a reader never sees a half-written CSV or JSON.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(ValueError):
    pass


def valid_component(name: str) -> bool:
    return (
        bool(name) and name not in (".", "..") and "/" not in name
        and len(name.encode(errors="surrogateescape")) <= 255
        and not any(ord(c) < 32 or ord(c) == 127 for c in name)
    )


def open_subdir(dir_fd: int, part: str, create: bool = True) -> int:
    """An fd (the caller closes it) of the directory `part` below `dir_fd`, made
    (0750) if `create`; never through a link."""
    if not valid_component(part):
        raise UnsafePath(f"refusing path component {part!r}")
    if create:
        try:
            os.mkdir(part, 0o750, dir_fd=dir_fd)
        except FileExistsError:
            pass
    return os.open(part, _DIR_FLAGS, dir_fd=dir_fd)


def open_dir(dump_root: Path, parts: Sequence[str], create: bool) -> int:
    """An fd (the caller closes it) of <dump_root>/<parts...>, opened one component
    at a time."""
    for part in parts:
        if not valid_component(part):
            raise UnsafePath(f"refusing path component {part!r}")
    fd = os.open(dump_root, _DIR_FLAGS)
    try:
        for part in parts:
            nfd = open_subdir(fd, part, create)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_files(dump_root: Path, files: Sequence[tuple[Sequence[str], bytes]]) -> None:
    """Replaces <dump_root>/<rel...> with data (mode 0640) for each (rel, data).
    As a unit, as far as a full disk or a bad name goes: every temporary is
    written before any is renamed, so a failure replaces none (a crash between
    the renames can still replace only the first ones)."""
    staged: list[tuple[int, str, str]] = []  # (dir fd, temporary, name)
    try:
        for rel, data in files:
            *dirs, name = rel
            if not valid_component(name):
                raise UnsafePath(f"refusing file name {name!r}")
            fd = open_dir(dump_root, dirs, create=True)
            tmp = f".{name}.{os.getpid()}.tmp"
            staged.append((fd, tmp, name))
            try:
                os.unlink(tmp, dir_fd=fd)
            except FileNotFoundError:
                pass
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o640, dir_fd=fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
            finally:
                os.close(out)
        while staged:
            fd, tmp, name = staged[0]
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            os.close(fd)
            staged.pop(0)
    finally:
        for fd, tmp, _ in staged:  # only on failure: nothing of these was renamed
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            os.close(fd)


def append_files(dump_root: Path, files: Sequence[tuple[Sequence[str], bytes]]) -> None:
    """Appends data to each existing <dump_root>/<rel...>, as a unit as far as a
    full disk goes: a failed write takes every file of the unit back to its
    size before (a crash between the writes can still leave the first ones
    longer: a later `rebuild` writes them anew)."""
    done: list[tuple[int, int]] = []  # (fd, size before)
    try:
        for rel, data in files:
            *dirs, name = rel
            if not valid_component(name):
                raise UnsafePath(f"refusing file name {name!r}")
            fd = open_dir(dump_root, dirs, create=False)
            try:
                out = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
                              | os.O_NONBLOCK,
                              dir_fd=fd)
            finally:
                os.close(fd)
            done.append((out, os.fstat(out).st_size))
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise UnsafePath(f"not a regular file: {'/'.join(rel)}")
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        for out, _ in done:
            os.close(out)
        done = []
    finally:
        for out, size in done:  # only on failure: no torn row stays behind
            try:
                os.ftruncate(out, size)
            except OSError:
                pass
            os.close(out)


def sync_files(dump_root: Path, rels: Sequence[Sequence[str]]) -> None:
    """Makes the contents of <dump_root>/<rel...> durable (fdatasync)."""
    for rel in rels:
        *dirs, name = rel
        fd = open_dir(dump_root, dirs, create=False)
        try:
            f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                        dir_fd=fd)
        finally:
            os.close(fd)
        try:
            os.fdatasync(f)
        finally:
            os.close(f)


def overwrite_in_place(dump_root: Path, rel: Sequence[str], data: bytes) -> bool:
    """Writes data over <dump_root>/<rel...> where it stands, padded with blanks to
    the old size, when the file already has room for it (a full disk, where no
    new file can be made). False when it has not; readers may see it half done."""
    *dirs, name = rel
    fd = open_dir(dump_root, dirs, create=False)
    try:
        out = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        st = os.fstat(out)
        if not stat.S_ISREG(st.st_mode) or len(data) > st.st_size:
            return False
        view = memoryview(data.ljust(st.st_size))
        offset = 0
        while view:
            n = os.pwrite(out, view, offset)
            view, offset = view[n:], offset + n
        return True
    finally:
        os.close(out)


def write_streamed(dump_root: Path, rel: Sequence[str], write: Callable[[BinaryIO], None]) -> None:
    """Like write_files for one file whose bytes `write(f)` streams into f, so
    that they never need to be in memory at once."""
    *dirs, name = rel
    fd = open_dir(dump_root, dirs, create=True)
    try:
        write_streamed_at(fd, name, write)
    finally:
        os.close(fd)


def write_streamed_at(dir_fd: int, name: str, write: Callable[[BinaryIO], None]) -> None:
    """write_streamed into the directory `dir_fd` (from open_dir or open_subdir):
    a temporary, renamed to `name` once `write(f)` has written it all."""
    if not valid_component(name):
        raise UnsafePath(f"refusing file name {name!r}")
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o640, dir_fd=dir_fd)
    try:
        with os.fdopen(out, "wb") as f:
            write(f)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


def remove_file(dump_root: Path, rel: Sequence[str]) -> None:
    *dirs, name = rel
    try:
        fd = open_dir(dump_root, dirs, create=False)
    except (FileNotFoundError, NotADirectoryError, UnsafePath):
        return
    try:
        os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def read_tail(dump_root: Path, rel: Sequence[str], n: int) -> bytes | None:
    """The last n bytes (or fewer) of a regular file, None if it cannot be read."""
    *dirs, name = rel
    try:
        fd = open_dir(dump_root, dirs, create=False)
    except (OSError, UnsafePath):
        return None
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                    dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(f, "rb") as fh:
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            return None
        fh.seek(max(0, st.st_size - n))
        return fh.read(n)


def read_file(dump_root: Path, rel: Sequence[str]) -> bytes | None:
    *dirs, name = rel
    try:
        fd = open_dir(dump_root, dirs, create=False)
    except (OSError, UnsafePath):
        return None
    try:  # O_NONBLOCK: a FIFO planted at the name is not waited on (and not read)
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                    dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(f, "rb") as fh:
        return fh.read() if stat.S_ISREG(os.fstat(f).st_mode) else None


# Temporary names of the shim (.<name>.<pid>.<tid>.tmp) and of the control
# plane (.<name>.<pid>.tmp): group 1 is the writer's pid.
_TEMP = re.compile(r"^\..+?\.(\d+)(?:\.\d+)?\.tmp$")


def sweep_stale_temps(dump_root: Path, alive) -> int:
    """Removes the temporary files that a killed shim or daemon left below data/,
    info/ and manifest/ (never followed links); `alive(pid)` keeps those of live writers.
    Returns how many were removed."""
    removed = 0
    for top in ("data", "info", "manifest"):
        for dirpath, _dirs, files in os.walk(dump_root / top):
            for name in files:
                m = _TEMP.match(name)
                if m and not alive(int(m.group(1))):
                    try:
                        os.unlink(os.path.join(dirpath, name))
                        removed += 1
                    except OSError:
                        pass
    return removed

