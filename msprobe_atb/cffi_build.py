"""The build step shared by the package's cffi extensions (run by `make pyext`,
never imported at run time): a header as a cdef, and a compile in a temporary dir
whose library replaces the last build's beside the package's modules."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cffi import FFI


def cdef_of(header: Path) -> str:
    """The header without its preprocessor lines, which cffi's cdef cannot parse."""
    return "\n".join(x for x in header.read_text().splitlines() if not x.lstrip().startswith("#"))


def build_into(dest: Path, name: str, make: Callable[[Path], FFI]) -> None:
    """Compiles `make(tmp)` (tmp: a scratch dir for generated sources) and puts the
    library in `dest`, removing the older builds of extension `name` there."""
    with tempfile.TemporaryDirectory(prefix=f"msprobe_atb{name}.") as tmp:
        built = Path(make(Path(tmp)).compile(tmpdir=tmp, verbose=False))
        for old in dest.glob(f"{name}*.so"):
            old.unlink()
        shutil.copy2(built, dest / built.name)
    print(f"built {(dest / built.name)}")
