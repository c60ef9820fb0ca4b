"""Builds the cffi extension `msprobe_atb.control._ctl` over the control block.

The cdef is control.h itself (minus the include guard and the stdint include,
which cffi cannot parse), so the Python side can never drift from the layout
the shim compiles. Run from anywhere: `python msprobe_atb/control/_build.py`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cffi import FFI

from msprobe_atb.cffi_build import build_into

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "native" / "include" / "msprobe_atb" / "control.h"
SOURCE = REPO / "native" / "core" / "mechanisms" / "control.c"
PACKAGE_DIR = Path(__file__).resolve().parent
_SKIP = re.compile(r"^\s*#\s*(ifndef|endif|include)\b|^\s*#\s*define\s+MSPROBE_ATB_CONTROL_H\b")


def cdef_text(header: str) -> str:
    """control.h without the preprocessor lines cffi does not understand."""
    return "\n".join(line for line in header.splitlines() if not _SKIP.match(line))


def make_builder() -> FFI:
    ffi = FFI()
    ffi.cdef(cdef_text(HEADER.read_text()))
    ffi.set_source(
        "msprobe_atb.control._ctl",
        '#include "msprobe_atb/control.h"',
        sources=[str(SOURCE)],
        include_dirs=[str(REPO / "native" / "include")],
        extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra"],
    )
    return ffi


def main() -> int:
    build_into(PACKAGE_DIR, "_ctl", lambda _tmp: make_builder())
    return 0


if __name__ == "__main__":
    sys.exit(main())
