"""Writing derived files safely under the dump root.

Every directory is opened one component at a time with O_NOFOLLOW from the
dump root, so no symlink and no `..` in a model-supplied name can lead outside
`atb_dump_data`. Files are written to a temporary name and renamed into place,
so a reader never sees a half-written CSV or JSON. A `durable` write (a commit
point: a round marker, a manifest part) also survives a machine crash: the file
is fsync'd before its rename and the directories from the dump root down to it
after (contracts §5.4).
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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _open_temporary(dir_fd: int, name: str) -> tuple[str, int]:
    """(name, fd) of a new temporary beside `name` in dir_fd, open for writing (one
    a dead writer of this pid left is replaced)."""
    if not valid_component(name):
        raise UnsafePath(f"refusing file name {name!r}")
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        os.unlink(tmp, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                  0o640, dir_fd=dir_fd)
    return tmp, out


def staged(dir_fd: int, name: str, data: bytes, durable: bool) -> str:
    """Writes data to a temporary beside `name` in dir_fd (on disk if `durable`);
    returns the temporary, for rename_staged."""
    tmp, out = _open_temporary(dir_fd, name)
    try:
        _write_all(out, data)
        if durable:
            os.fsync(out)
    except BaseException:
        os.close(out)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(out)
    return tmp


def _replace_staged(files: Sequence[tuple[int, str, bytes]], durable: bool = False) -> None:
    """Writes each (dir fd, name, data) to a temporary, then renames them all: a
    failure before the renames replaces none. `durable`: the files on disk
    before their renames, the renames on disk (their directories fsync'd) after."""
    pending: list[tuple[int, str, str]] = []
    try:
        for fd, name, data in files:
            pending.append((fd, staged(fd, name, data, durable), name))
        while pending:
            fd, tmp, name = pending[0]
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            pending.pop(0)
        if durable:
            for fd in dict.fromkeys(fd for fd, _, _ in files):
                os.fsync(fd)
    finally:
        for fd, tmp, _ in pending:  # only on failure: nothing of these was renamed
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass


def rename_staged(dir_fd: int, tmp: str, name: str) -> None:
    """Renames a temporary of `staged` to `name`; removes it if that fails."""
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        remove_at(dir_fd, tmp)
        raise


def write_files(dump_root: Path, files: Sequence[tuple[Sequence[str], bytes]],
                durable: bool = False) -> None:
    """Replaces <dump_root>/<rel...> with data (mode 0640) for each (rel, data).
    As a unit, as far as a full disk or a bad name goes: every temporary is
    written before any is renamed, so a failure replaces none (a crash between
    the renames can still replace only the first ones). `durable`: a commit
    point, on disk when this returns, with the directories that lead to it."""
    fds: list[int] = []
    try:
        for rel, _ in files:
            fds.append(open_dir(dump_root, rel[:-1], create=True))
        _replace_staged([(fd, rel[-1], data) for fd, (rel, data) in zip(fds, files)], durable)
        if durable:
            for rel in dict.fromkeys(tuple(rel[:-1]) for rel, _ in files):
                sync_parents(dump_root, rel)
    finally:
        for fd in fds:
            os.close(fd)


def write_files_at(dir_fd: int, files: Sequence[tuple[str, bytes]]) -> None:
    """write_files for files of one directory (an fd of open_dir)."""
    _replace_staged([(dir_fd, name, data) for name, data in files])


def sync_dir(dump_root: Path, rel_dir: Sequence[str]) -> None:
    """fsync of the directory <dump_root>/<rel_dir...>: its entries on disk."""
    fd = open_dir(dump_root, rel_dir, create=False)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_parents(dump_root: Path, rel_dir: Sequence[str]) -> None:
    """fsync of the directories above <dump_root>/<rel_dir...>, from it up to the
    dump root: the entries that lead to a directory made since, on disk."""
    for n in range(len(rel_dir) - 1, -1, -1):
        sync_dir(dump_root, rel_dir[:n])


def append_files_at(dir_fd: int, files: Sequence[tuple[str, bytes]]) -> None:
    """Appends data to each existing file `name` of the directory, as a unit as
    far as a full disk goes: a failed write takes every file of the unit back to
    its size before (a crash between the writes can still leave the first ones
    longer: a later `rebuild` writes them anew)."""
    done: list[tuple[int, int]] = []  # (fd, size before)
    try:
        for name, data in files:
            if not valid_component(name):
                raise UnsafePath(f"refusing file name {name!r}")
            out = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
                          | os.O_NONBLOCK, dir_fd=dir_fd)
            st = os.fstat(out)
            done.append((out, st.st_size))
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"not a regular file: {name}")
            _write_all(out, data)
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


def sync_files_at(dir_fd: int, names: Sequence[str]) -> None:
    """Makes the contents of the directory's files durable (fdatasync)."""
    for name in names:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                    dir_fd=dir_fd)
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


def write_streamed(dump_root: Path, rel: Sequence[str], write: Callable[[BinaryIO], None],
                   durable: bool = False) -> None:
    """Like write_files for one file whose bytes `write(f)` streams into f, so
    that they never need to be in memory at once."""
    *dirs, name = rel
    fd = open_dir(dump_root, dirs, create=True)
    try:
        write_streamed_at(fd, name, write, durable)
    finally:
        os.close(fd)
    if durable:
        sync_parents(dump_root, dirs)


def write_streamed_at(dir_fd: int, name: str, write: Callable[[BinaryIO], None],
                      durable: bool = False) -> None:
    """write_streamed into the directory `dir_fd` (from open_dir or open_subdir):
    a temporary, renamed to `name` once `write(f)` has written it all (and, if
    `durable`, fsync'd; the directory fsync'd after the rename)."""
    tmp, out = _open_temporary(dir_fd, name)
    try:
        with os.fdopen(out, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    if durable:
        os.fsync(dir_fd)


def remove_file(dump_root: Path, rel: Sequence[str]) -> None:
    *dirs, name = rel
    try:
        fd = open_dir(dump_root, dirs, create=False)
    except (FileNotFoundError, NotADirectoryError, UnsafePath):
        return
    try:
        remove_at(fd, name)
    finally:
        os.close(fd)


def remove_at(dir_fd: int, name: str) -> bool:
    """Removes the file `name` of the directory; False if there was none."""
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False


def read_at(dir_fd: int, name: str, tail: int | None = None) -> bytes | None:
    """A regular file of the directory (its last `tail` bytes), None if it
    cannot be read. O_NONBLOCK: a FIFO planted at the name is not waited on."""
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                    dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(f, "rb") as fh:
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            return None
        if tail is not None:
            fh.seek(max(0, st.st_size - tail))
        return fh.read()


def read_file(dump_root: Path, rel: Sequence[str], tail: int | None = None) -> bytes | None:
    *dirs, name = rel
    try:
        fd = open_dir(dump_root, dirs, create=False)
    except (OSError, UnsafePath):
        return None
    try:
        return read_at(fd, name, tail)
    finally:
        os.close(fd)


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

