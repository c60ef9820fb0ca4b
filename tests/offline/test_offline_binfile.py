"""The .bin reader: alias stubs followed, corrupt and truncated files named."""

from __future__ import annotations

import os

import numpy as np
import pytest
from offline_synth import bin_bytes, write_bin

from msprobe_atb.offline import BinFileError, TensorNotSaved, load_bin, read_header


def test_alias_stub_followed(tmp_path):
    real = write_bin(tmp_path / "5_L/after/outtensor0.bin", np.arange(6, dtype=np.float32), 0)
    stub = tmp_path / "5_L/0_Child/before/intensor0.bin"
    write_bin(stub, b"", 0, (6,), alias=os.path.relpath(real, stub.parent))
    h = read_header(stub)
    assert h.is_stub and h.object_count == 0 and h.length == 0
    np.testing.assert_array_equal(load_bin(stub), np.arange(6))


def test_alias_chain_and_loop(tmp_path):
    real = write_bin(tmp_path / "a.bin", np.ones(2, np.float16), 1)
    write_bin(tmp_path / "b.bin", b"", 1, (2,), alias="a.bin")
    write_bin(tmp_path / "c.bin", b"", 1, (2,), alias="b.bin")
    assert load_bin(tmp_path / "c.bin").tolist() == [1.0, 1.0]
    write_bin(tmp_path / "x.bin", b"", 1, (2,), alias="y.bin")
    write_bin(tmp_path / "y.bin", b"", 1, (2,), alias="x.bin")
    with pytest.raises(BinFileError, match="alias loop"):
        load_bin(tmp_path / "x.bin")
    assert real.exists()


def test_kernel_stub_is_not_saved(tmp_path):
    f = write_bin(tmp_path / "intensor0.bin", b"", 1, (2,), alias="intensor0.bin")
    with pytest.raises(TensorNotSaved, match="intentionally not saved"):
        load_bin(f)


def test_alias_to_missing_file(tmp_path):
    f = write_bin(tmp_path / "s.bin", b"", 0, (2,), alias="../nowhere/outtensor0.bin")
    with pytest.raises(BinFileError, match=r"s\.bin: alias stub points to .*does not exist"):
        load_bin(f)


@pytest.mark.parametrize("mutate,message", [
    (lambda b: b[:-3], "truncated: the header promises 16 payload bytes, the file holds 13"),
    (lambda b: b + b"xx", "2 unexpected bytes after the 16-byte payload"),
    (lambda b: b[:20], "truncated inside its header"),
    (lambda b: b"", "empty"),
    (lambda b: b"PK\x03\x04 zip", "not an ATB .bin"),
    (lambda b: b.replace(b"dtype=0", b"dtype=zz"), "dtype='zz' is not an integer"),
    (lambda b: b.replace(b"dims=4\n", b""), "lacks the dims field"),
    (lambda b: b.replace(b"dims=4", b"dims=5"), "does not fit dims=5 of dtype float32"),
    (lambda b: b.replace(b"format=2\n", b"format2\n"), "is not key=value"),
])
def test_corrupt_files_named(tmp_path, mutate, message):
    good = bin_bytes(np.arange(4, dtype=np.float32).tobytes(), 0, (4,))
    f = tmp_path / "op" / "outtensor0.bin"
    f.parent.mkdir()
    f.write_bytes(mutate(good))
    with pytest.raises(BinFileError) as ei:
        load_bin(f)
    assert str(f) in str(ei.value) and message in str(ei.value)


def test_missing_file(tmp_path):
    with pytest.raises(BinFileError, match="cannot open"):
        load_bin(tmp_path / "nope.bin")


def test_scalar_and_empty(tmp_path):
    s = load_bin(write_bin(tmp_path / "s.bin", np.float32(2.5).tobytes(), 0, ()))
    assert s.shape == () and s == 2.5
    e = load_bin(write_bin(tmp_path / "e.bin", b"", 0, (0, 3)))
    assert e.shape == (0, 3)
