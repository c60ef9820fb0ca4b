"""`msprobe-atb convert`: `.bin` to `.npy`, keeping the tree.

`IN/a/b/outtensor0.bin` becomes `OUT/a/b/outtensor0.npy`, so two ops' tensors
never collide. Alias stubs are written with the data they point to; kernel
stubs that were intentionally not saved are skipped and counted. An output is
up to date (skipped on a rerun) if it is newer than its source and the file
that source resolves to; outputs are written to a temporary name and renamed,
so an interrupted run never leaves a partial `.npy` that looks done. A `.bin`
that is a symbolic link leading out of the directory converted (confine.py) is
not read: it is named as an error, and so is a directory that cannot be listed
(another user's dump: which permission is missing, where)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from msprobe_atb.access import denied

from .binfile import BinFileError, TensorNotSaved, load_payload, resolve
from .confine import Confinement


@dataclass
class ConvertReport:
    converted: int = 0
    up_to_date: int = 0
    not_saved: int = 0
    errors: list[str] = field(default_factory=list)


def _unlisted(errors: list[str]):
    """os.walk's onerror: a directory it cannot list goes to errors, by name (a
    dump of another user's would otherwise convert nothing, and say no error)."""
    def note(e: OSError) -> None:
        errors.append(denied(e) if isinstance(e, PermissionError)
                      else f"{e.filename}: cannot be listed: {e.strerror}; not converted")
    return note


def _sources(src: Path, errors: list[str]) -> list[Path]:
    """The .bin files under src (or src itself); a link leading out of src, and a
    directory that cannot be listed, go to errors. os.walk does not enter linked
    directories."""
    if src.is_file():
        return [src]
    out = []
    box = Confinement(src)
    for dirpath, dirs, files in os.walk(src, onerror=_unlisted(errors)):
        dirs[:] = [d for d in dirs if d != ".probe"]
        for f in files:
            if not f.endswith(".bin"):
                continue
            p = Path(dirpath) / f
            if box.allows(p) is None:
                errors.append(f"{p}: {box.refusal(str(p))}; not read")
            else:
                out.append(p)
    return sorted(out)


def _one(args: tuple[str, str, bool]) -> tuple[str, str]:
    """Convert one file; returns (state, message)."""
    src, dst, raw = args
    try:
        hdr = resolve(src)
        d = Path(dst)
        if d.exists():
            t = d.stat().st_mtime_ns
            if t >= os.stat(src).st_mtime_ns and t >= hdr.path.stat().st_mtime_ns:
                return "up_to_date", ""
        arr = load_payload(hdr, raw=raw)
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = d.with_name(f".{d.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, arr, allow_pickle=False)
        os.replace(tmp, d)
        return "converted", ""
    except TensorNotSaved:
        return "not_saved", ""
    except BinFileError as e:
        return "error", str(e)
    except OSError as e:
        return "error", f"{dst}: cannot write: {e.strerror}"


def convert(src: str | Path, out: str | Path, *, jobs: int = 1, raw: bool = False,
            progress: Callable[[int], None] | None = None,
            total: Callable[[int], None] | None = None) -> ConvertReport:
    src, out = Path(src).resolve(), Path(out).resolve()
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    rep = ConvertReport()
    files = _sources(src, rep.errors)
    if total:
        total(len(files))
    if src.is_file():
        dst = out / (src.stem + ".npy") if out.is_dir() or out.suffix != ".npy" else out
        work = [(str(src), str(dst), raw)]
    else:
        work = [(str(f), str(out / f.relative_to(src).with_suffix(".npy")), raw) for f in files]

    def take(state: str, msg: str) -> None:
        if state == "error":
            rep.errors.append(msg)
        else:
            setattr(rep, state, getattr(rep, state) + 1)
        if progress:
            progress(1)

    if jobs > 1 and len(work) > 16:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            for state, msg in ex.map(_one, work, chunksize=16):
                take(state, msg)
    else:
        for w in work:
            take(*_one(w))
    return rep
