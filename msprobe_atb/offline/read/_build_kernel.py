"""Builds the cffi extensions of offline/read: `_pair_kernel` from
native/compare/pair_kernel.c (the fused compare metrics) and `_stats_kernel`
from the shim's own statistics (native/core/mechanisms/stats.c and what it
uses), so statistics filled offline for a dump that records none are the ones
a `task: statistics` dump would have recorded. Each cdef is its header without
the preprocessor lines. Run by `make` (pyext)."""

from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

from msprobe_atb.cffi_build import build_into, cdef_of

REPO = Path(__file__).resolve().parents[3]
PAIR_SRC = REPO / "native" / "compare"
CORE_SRC = REPO / "native" / "core" / "mechanisms"
FLAGS = ["-std=gnu11", "-O3", "-ffp-contract=off", "-Wall", "-Wextra"]


def _ffi(name: str, header: Path, sources: list[Path], needs: tuple[Path, ...] = ()) -> FFI:
    """needs: the headers whose types `header`'s cdef uses (its own includes)."""
    ffi = FFI()
    ffi.cdef("\n".join(cdef_of(h) for h in (*needs, header)))
    ffi.set_source(f"msprobe_atb.offline.read.{name}", f'#include "{header.name}"',
                   sources=[str(s) for s in sources], include_dirs=[str(header.parent)],
                   extra_compile_args=FLAGS)
    return ffi


def builders() -> dict[str, FFI]:
    return {
        "_pair_kernel": _ffi("_pair_kernel", PAIR_SRC / "pair_kernel.h",
                             [PAIR_SRC / "pair_kernel.c"]),
        "_stats_kernel": _ffi("_stats_kernel", CORE_SRC / "stats.h",
                              [CORE_SRC / f for f in ("stats.c", "stats_simd.c", "dtype.c",
                                                      "jsonw.c")],
                              needs=(CORE_SRC / "float_acc.h",)),
    }


def main() -> int:
    dest = Path(__file__).resolve().parent
    for name, ffi in builders().items():
        build_into(dest, name, lambda _tmp, ffi=ffi: ffi)
    return 0


if __name__ == "__main__":
    sys.exit(main())
