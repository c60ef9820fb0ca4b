"""The dtype tables agree: the shim's (native/core/mechanisms/dtype.c, which names the
dtype in records and sizes payloads) and Python's (offline/read/dtypes.py, which reads
.bin files; tree/vocab.py, which names them in the CSVs): every code, its name and its
width."""

from __future__ import annotations

import subprocess

import pytest
from testkit import c_program

from msprobe_atb.offline.read import dtypes
from msprobe_atb.tree import vocab

# every aclDataType code and more: the C table is asked for each
_CODES = range(-4, 128)


@pytest.fixture(scope="module")
def c_table(tmp_path_factory) -> dict[int, tuple[str, int]]:
    """The shim's known codes: name and bits per element (0: no fixed width)."""
    exe = c_program(tmp_path_factory.mktemp("dtype"), (
        '#include <stdio.h>\n#include "dtype.h"\n'
        "int main(void) {\n"
        f"    for (int c = {_CODES.start}; c < {_CODES.stop}; c++)\n"
        "        if (msp_dtype_name(c))\n"
        '            printf("%d %s %u\\n", c, msp_dtype_name(c), msp_dtype_bits(c));\n'
        "    return 0;\n}\n"), ("dtype.c",))
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {int(c): (name, int(bits)) for c, name, bits in (x.split() for x in out.splitlines())}


def test_every_code_has_the_same_name(c_table):
    names = {c: name for c, (name, _) in c_table.items()}
    assert names == {c: n for c, n in dtypes.DTYPE_NAMES.items() if c in _CODES and c >= 0}
    assert names == vocab.DTYPE_NAMES
    # -1 is ATB's undefined dtype: a name for the reader, none for the shim
    assert dtypes.DTYPE_NAMES[-1] == "undefined" and -1 not in c_table


def test_every_code_is_read(c_table):
    assert set(dtypes.SPECS) == set(c_table)


@pytest.mark.parametrize("n", (1, 2, 3, 7, 8, 9, 1000))
def test_every_width_is_the_same(c_table, n):
    """The payload of n elements: ceil(n * bits / 8) bytes, as the shim checks `size`."""
    for code, (name, bits) in c_table.items():
        sizes = dtypes.SPECS[code].nbytes(n)
        if bits:
            assert sizes == ((n * bits + 7) // 8,), f"{name} ({code}), {n} elements"
        else:  # no fixed width: the shim checks no size, the reader takes what it finds
            assert name == "string" or name.startswith("float6_"), name
