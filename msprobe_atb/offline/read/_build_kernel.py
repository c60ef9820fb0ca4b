"""Builds the cffi extension `msprobe_atb.offline.read._pair_kernel` from
native/compare/pair_kernel.c (the fused compare metrics). The cdef is the
header itself without its preprocessor lines. Run by `make` (pyext)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from cffi import FFI

REPO = Path(__file__).resolve().parents[3]
SRC = REPO / "native" / "compare"


def builder() -> FFI:
    ffi = FFI()
    header = (SRC / "pair_kernel.h").read_text()
    ffi.cdef("\n".join(x for x in header.splitlines() if not x.lstrip().startswith("#")))
    ffi.set_source("msprobe_atb.offline.read._pair_kernel", '#include "pair_kernel.h"',
                   sources=[str(SRC / "pair_kernel.c")], include_dirs=[str(SRC)],
                   extra_compile_args=["-std=gnu11", "-O3", "-ffp-contract=off", "-Wall",
                                       "-Wextra"])
    return ffi


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="msprobe_atb_kernel.") as tmp:
        built = Path(builder().compile(tmpdir=tmp))
        dest = Path(__file__).resolve().parent
        for old in dest.glob("_pair_kernel*.so"):
            old.unlink()
        shutil.copy2(built, dest / built.name)
    print(f"built {built.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
