"""The round a tensor path is in, as the shim reads it (native/core/mechanisms/pending.c
`msp_round_key`: the rounds its `round` records and the exit record's `unrecorded`
name) and as the control plane reads it (tree/csvfmt.py `parse_tensor_path`: the round
a row goes in; offline/read/losses.py: the rounds a dump lost tensors in), on the same
crafted paths, hostile ones too. They agree on every path the shim accepts
(`msp_path_check`), but for a key too long for the shim's table, which it leaves
unnamed."""

from __future__ import annotations

import os
import random
import subprocess

import pytest
from testkit import c_program

from msprobe_atb.offline.read.losses import _round_of
from msprobe_atb.tree.csvfmt import parse_tensor_path

ROUND_KEY_LEN = 40  # MSP_ROUND_KEY_LEN (control.h): the key and its NUL

_CRAFTED = [
    b"0_7/3/1_L/before/x.bin", b"0_7/3/x", b"0_7/3", b"0_7", b"", b"/", b"///",
    b"//0_7//3/x", b"/0_7/3/x", b"0_7/3/", b"0_7/3//", b"0_7/./x", b"./0_7/3/x",
    b"0_7/../3/x", b"../0_7/3/x", b"0_7/3/..", b"0_7/3/.", b"0_7/.../x", b"0_7/..a/x",
    b"a b/c\td/x", b"0_7/3/\x00/x", b"0_\xff\xfe/3/x", b"\xc3\xa9_1/\xe2\x82\xac/x/y",
    b"0_7/3\\/x", b'0_7/"3"/x', b"0_7/3/x\n", b"\n/3/x",
    b"d" * 18 + b"/" + b"e" * 20 + b"/x",  # a key of 39 bytes: the longest named
    b"d" * 18 + b"/" + b"e" * 21 + b"/x",  # 40: too long
    b"d" * 255 + b"/1/x", b"1/" + b"e" * 256 + b"/x", b"0_7/3/" + b"f" * 4100,
]


def _random_paths(n: int) -> list[bytes]:
    """Paths of components from a hostile alphabet (slashes, dots, controls, bytes
    that are not UTF-8), of every length up to past the key's room."""
    rng = random.Random(1234)
    alphabet = [b"/", b"/", b"/", b".", b"..", b"_", b"0", b"7", b"a", b"\x00", b"\n",
                b"\xff", b"\xc3\xa9", b" ", b"\\"]
    out = []
    for _ in range(n):
        out.append(b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24))))
        out.append(b"/".join(b"x" * rng.randint(0, 30) for _ in range(rng.randint(1, 5))))
    return out


@pytest.fixture(scope="module")
def shim_keys(tmp_path_factory):
    """path -> (accepted by msp_path_check, msp_round_key's key or None)."""
    paths = _CRAFTED + _random_paths(2000)
    exe = c_program(tmp_path_factory.mktemp("roundkey"), r"""
#include <stdio.h>
#include <string.h>
#include "fsutil.h"
#include "pending.h"

static int hexval(int c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int main(void)
{
    static char line[2 * 8192 + 2], path[8192];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line) / 2;
        for (size_t i = 0; i < n; i++)
            path[i] = (char)(hexval(line[2 * i]) * 16 + hexval(line[2 * i + 1]));
        char key[MSP_ROUND_KEY_LEN];
        size_t len = msp_round_key(path, n, key);
        printf("%d ", msp_path_check(path, n) == NULL);
        for (size_t i = 0; i < len; i++)
            printf("%02x", (unsigned char)key[i]);
        printf("%s\n", len ? "" : "-");
    }
    return 0;
}
""", ("pending.c", "fsutil.c", "jsonw.c", "content_hash.c"))
    out = subprocess.run([str(exe)], input="".join(p.hex() + "\n" for p in paths),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(paths)
    return {p: (ok == "1", None if key == "-" else bytes.fromhex(key))
            for p, (ok, key) in zip(paths, (x.split(" ") for x in out))}


def _python_key(path: bytes) -> bytes | None:
    """The round csvfmt puts a record of this path in (the record holds the path as
    JSON decodes it: its bytes through surrogateescape)."""
    tp = parse_tensor_path(os.fsdecode(path))
    return os.fsencode("/".join(tp.round_key)) if tp else None


def test_the_shim_and_the_builder_put_a_path_in_the_same_round(shim_keys):
    for path, (accepted, c_key) in shim_keys.items():
        py_key = _python_key(path)
        if not accepted:
            continue  # a lost record, in no round (its bytes are checked by the shim only)
        if c_key is None and py_key is not None:
            assert len(py_key) >= ROUND_KEY_LEN, path  # unnamed by the shim: too long
        else:
            assert c_key == py_key, path


def test_a_path_the_builder_refuses_the_shim_refuses(shim_keys):
    for path, (accepted, _) in shim_keys.items():
        if _python_key(path) is None:
            assert not accepted or path.count(b"/") < 2, path


def test_the_loss_tally_names_the_shims_round(shim_keys):
    for path, (accepted, c_key) in shim_keys.items():
        if accepted and c_key is not None:
            assert os.fsencode("/".join(_round_of(os.fsdecode(path)))) == c_key, path


def test_the_crafted_paths_cover_each_outcome(shim_keys):
    outcomes = {(shim_keys[p][0], shim_keys[p][1] is None, _python_key(p) is None)
                for p in _CRAFTED}
    assert outcomes >= {(True, False, False), (True, True, True), (True, True, False),
                        (False, False, True), (False, True, True)}
