"""What a PermissionError means, in words a user can act on: which path stops
them (often a directory above the one named), the permission they lack, whose
it is and its mode, and who they are. Used by `msprobe-atb` for any command run
on a dump someone else owns."""

from __future__ import annotations

import grp
import os
import pwd
import stat


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _lacks(path: str) -> tuple[str, str] | None:
    """(the path that stops us, the permission we lack there), or None."""
    here = "/"
    for part in [p for p in os.path.normpath(path).split("/") if p][:-1]:
        here = os.path.join(here, part)
        if os.path.isdir(here) and not os.access(here, os.X_OK):
            return here, "search (x)"
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        need = [(os.R_OK, "read (r)"), (os.X_OK, "search (x)"), (os.W_OK, "write (w)")]
    else:
        need = [(os.R_OK, "read (r)"), (os.W_OK, "write (w)")]
    return next(((path, what) for bit, what in need if not os.access(path, bit)), None)


def denied(exc: PermissionError) -> str:
    """One line: what was denied and why."""
    path = exc.filename if isinstance(exc.filename, str) else (
        os.fsdecode(exc.filename) if isinstance(exc.filename, bytes) else None)
    me = _user(os.geteuid())
    if path is None:
        return f"permission denied ({exc.strerror or exc}); you are {me}"
    where = _lacks(os.path.abspath(path))
    if where is None:
        return f"{path}: permission denied; you are {me}"
    blocker, what = where
    st = os.stat(blocker)
    owner = _user(st.st_uid)
    return (f"{path}: permission denied: you ({me}) have no {what} permission on {blocker} "
            f"(owner {owner}; group {_group(st.st_gid)}; mode {stat.S_IMODE(st.st_mode):04o}); "
            f"run this as its owner, or have them give you {what.split()[0]} access")
