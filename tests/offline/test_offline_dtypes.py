"""Every dtype decoder of docs/msprobe_format.md §7, on synthetic .bin files with known values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from offline_synth import write_bin

from msprobe_atb.offline import load_bin, read_header
from msprobe_atb.offline.read.dtypes import DTYPE_CODES, SPECS, dtype_name


def test_native_types_round_trip(tmp_path):
    for np_t, code in [("float32", 0), ("float16", 1), ("int8", 2), ("int32", 3), ("uint8", 4),
                       ("int16", 6), ("uint16", 7), ("uint32", 8), ("int64", 9),
                       ("uint64", 10), ("float64", 11), ("complex64", 16),
                       ("complex128", 17)]:
        a = (np.arange(12) - 5).astype(np_t).reshape(3, 4)
        got = load_bin(write_bin(tmp_path / f"{np_t}.bin", a, code))
        assert got.dtype == np.dtype(np_t) and got.shape == (3, 4)
        np.testing.assert_array_equal(got, a)


def test_bool(tmp_path):
    got = load_bin(write_bin(tmp_path / "b.bin", bytes([0, 1, 2, 0]), 12, (2, 2)))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, [[False, True], [True, False]])
    raw = load_bin(tmp_path / "b.bin", raw=True)
    np.testing.assert_array_equal(raw.ravel(), [0, 1, 2, 0])


def test_bf16_decodes_exactly_and_raw(tmp_path):
    vals = np.array([1.0, -2.5, 3.140625, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40],
                    dtype=np.float32)
    bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    f = write_bin(tmp_path / "bf.bin", bits.tobytes(), 27, (9,))
    got = load_bin(f)
    assert got.dtype == np.float32 and got.shape == (9,)
    expect = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(got, expect)  # NaN == NaN in assert_array_equal
    assert got[2] == 3.140625 and np.isposinf(got[5]) and np.isnan(got[7])
    assert got[8] != 0  # subnormal kept
    np.testing.assert_array_equal(load_bin(f, raw=True), bits)


def test_bf16_decodes_every_code_as_ml_dtypes_does():
    """Our shift against the reference implementation, all 65,536 codes (NaN
    payloads and signs included)."""
    import ml_dtypes
    codes = np.arange(1 << 16, dtype=np.uint16)
    got = SPECS[27].decode(codes.view(np.uint8), codes.size, False)
    ref = codes.view(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), ref.view(np.uint32))


def test_decoding_the_common_dtypes_does_not_import_ml_dtypes(tmp_path):
    """Importing ml_dtypes 0.7 costs ~0.7 CPU s, which halved compare's throughput on
    a 774 MiB pair: only the fp8/fp6/fp4 formats may import it."""
    files = [write_bin(tmp_path / "bf.bin", np.ones(4, np.uint16).tobytes(), 27, (4,)),
             write_bin(tmp_path / "h.bin", np.ones(4, np.float16), 1)]
    fp8 = write_bin(tmp_path / "f8.bin", bytes([0x38]), 36, (1,))
    code = ("import sys; from msprobe_atb.offline import load_bin; "
            "[load_bin(f) for f in sys.argv[1:-1]]; a = 'ml_dtypes' in sys.modules; "
            "load_bin(sys.argv[-1]); print(a, 'ml_dtypes' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, *map(str, files), str(fp8)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "True"]


def test_fp16_specials(tmp_path):
    a = np.array([65504, -np.inf, np.nan, 6e-8], dtype=np.float16)
    got = load_bin(write_bin(tmp_path / "h.bin", a, 1))
    assert got[0] == 65504 and np.isneginf(got[1]) and np.isnan(got[2]) and got[3] > 0


@pytest.mark.parametrize("code,byte,value", [
    (36, 0x38, 1.0), (36, 0x7E, 448.0), (36, 0x01, 2.0 ** -9), (36, 0xC0, -2.0),
    (36, 0x7F, np.nan), (36, 0xFF, np.nan),
    (35, 0x3C, 1.0), (35, 0x7B, 57344.0), (35, 0x7C, np.inf), (35, 0xFC, -np.inf),
    (35, 0x7D, np.nan), (35, 0x01, 2.0 ** -16),
    (37, 127, 1.0), (37, 130, 8.0), (37, 0, 2.0 ** -127), (37, 255, np.nan),
])
def test_fp8(tmp_path, code, byte, value):
    f = write_bin(tmp_path / "f8.bin", bytes([byte]), code, (1,))
    got = load_bin(f)
    assert got.dtype == np.float32
    if np.isnan(value):
        assert np.isnan(got[0])
    else:
        assert got[0] == np.float32(value)
    assert load_bin(f, raw=True)[0] == byte


def test_fp8_e5m2_matches_fp16_top_byte(tmp_path):
    codes = np.arange(256, dtype=np.uint8)
    got = load_bin(write_bin(tmp_path / "e5.bin", codes.tobytes(), 35, (256,)))
    ref = (codes.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, ref)


def test_int4_unpacked_and_raw(tmp_path):
    vals = [1, -1, 7, -8, 0]  # 5 elements -> 3 bytes, low nibble first
    nib = [v & 0xF for v in vals] + [0]
    packed = bytes(nib[i] | (nib[i + 1] << 4) for i in range(0, 6, 2))
    f = write_bin(tmp_path / "i4.bin", packed, 29, (5,))
    got = load_bin(f)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, vals)
    np.testing.assert_array_equal(load_bin(f, raw=True), list(packed))


def test_uint1_and_fp4_and_fp6(tmp_path):
    got = load_bin(write_bin(tmp_path / "u1.bin", bytes([0b00000101, 0b1]), 30, (9,)))
    np.testing.assert_array_equal(got, [1, 0, 1, 0, 0, 0, 0, 0, 1])
    # fp4 e2m1: 0x2 = 1.0, 0x7 = 6.0, 0xF = -6.0, 0x1 = 0.5
    got = load_bin(write_bin(tmp_path / "f4.bin", bytes([0x72, 0x1F]), 40, (4,)))
    np.testing.assert_array_equal(got, [1.0, 6.0, -6.0, 0.5])
    # fp6 e2m3, one per byte: 0x08 = 1.0, 0x1F = 7.5 (max), 0x21 = -0.125
    got = load_bin(write_bin(tmp_path / "f6.bin", bytes([0x08, 0x1F, 0x21]), 39, (3,)))
    np.testing.assert_array_equal(got, [1.0, 7.5, -0.125])
    # fp6 e3m2 packed (4 per 3 bytes): 0x0C = 1.0 x4
    bits = np.array([(0x0C >> b) & 1 for _ in range(4) for b in range(6)], dtype=np.uint8)
    packed = np.packbits(bits, bitorder="little").tobytes()
    got = load_bin(write_bin(tmp_path / "f6p.bin", packed, 38, (4,)))
    np.testing.assert_array_equal(got, [1.0] * 4)


def test_complex32(tmp_path):
    a = np.array([1.5, -2.0, 0.25, 4.0], dtype=np.float16)  # (1.5-2j), (0.25+4j)
    got = load_bin(write_bin(tmp_path / "c32.bin", a.tobytes(), 33, (2,)))
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got, [1.5 - 2j, 0.25 + 4j])


def test_every_dtype_has_a_decoder_and_a_name():
    for code in [c for c in DTYPE_CODES.values() if c >= 0]:
        assert code in SPECS, dtype_name(code)
    assert dtype_name(99) == "undefined(99)"


def test_header_fields(tmp_path):
    f = write_bin(tmp_path / "x.bin", np.zeros((2, 3), np.float16), 1)
    h = read_header(f)
    assert (h.dtype_name, h.format_name, h.dims, h.length, h.is_stub) == \
        ("float16", "nd", (2, 3), 12, False)


def test_hifloat8(tmp_path):
    cases = {0b0_11_0111_0: 32768.0, 0b0_11_1111_0: 2.0 ** -15, 0b0_01_11_000: 0.125,
             0b0_001_1_000: 0.5, 0b0_0001_000: 1.0, 0b0_0000_001: 2.0 ** -22,
             0b1_0001_100: -1.5, 0b0_01_00_111: 7.5, 0b0_10_0_01_10: 2.0 ** 5 * 1.5,
             0x00: 0.0, 0x6F: np.inf, 0xEF: -np.inf}
    codes = bytes([*cases, 0x80])
    f = write_bin(tmp_path / "hif8.bin", codes, 34, (len(codes),))
    got = load_bin(f)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got[:-1], np.array(list(cases.values()), np.float32))
    assert np.isnan(got[-1])
    assert load_bin(f, raw=True).tobytes() == codes
    every = load_bin(write_bin(tmp_path / "all.bin", bytes(range(256)), 34, (256,)))
    finite = every[np.isfinite(every)]
    assert finite.size == 253 and np.unique(finite).size == 253  # no two codes alike


def test_fp4_full_code_tables(tmp_path):
    """Every code of both fp4 formats (packed two per byte, low nibble first)
    against the published value tables: OCP MX e2m1, and e1m2 (bias 1)."""
    packed = bytes(lo | (hi << 4) for lo, hi in zip(range(0, 16, 2), range(1, 16, 2)))
    e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    e1m2 = [0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75]
    for code, table in ((40, e2m1), (41, e1m2)):
        got = load_bin(write_bin(tmp_path / f"{code}.bin", packed, code, (16,)))
        np.testing.assert_array_equal(got, np.array(table + [-v for v in table], np.float32))
        assert np.signbit(got[8]) and not np.signbit(got[0])  # -0 stays -0


def test_fp6_extremes(tmp_path):
    """OCP MX fp6: e3m2 spans ±28 with 2^-4 the smallest subnormal, e2m3 ±7.5 with 2^-3."""
    codes = bytes([0x1F, 0x3F, 0x01, 0x21])
    e3m2 = load_bin(write_bin(tmp_path / "e3m2.bin", codes, 38, (4,)))
    np.testing.assert_array_equal(e3m2, [28.0, -28.0, 2.0 ** -4, -(2.0 ** -4)])
    e2m3 = load_bin(write_bin(tmp_path / "e2m3.bin", codes, 39, (4,)))
    np.testing.assert_array_equal(e2m3, [7.5, -7.5, 2.0 ** -3, -(2.0 ** -3)])
