"""ATB dtype/format codes (docs/msprobe_format.md §7) and decoders from raw payload
bytes to numpy.

Every dtype of the aclDataType numbering is covered. Types numpy has natively
are viewed in place; the others are decoded to float32 (or stay raw bit
patterns with `raw=True`):

* bf16 as the high half of a float32 (exact);
* fp8 (e4m3fn, e5m2, e8m0), fp6 (e3m2, e2m3) and fp4 e2m1 through `ml_dtypes`,
  the reference implementation of these formats (OCP MX spec), imported on the
  first such tensor: importing ml_dtypes 0.7 costs ~0.7 CPU s (it registers its
  ufunc loops one by one), more than comparing a 400 MB pair;
* HiFloat8 and fp4 e1m2, which `ml_dtypes` does not have, through exact lookup
  tables of our own, tested against their published bit patterns;
* int4 and fp4 hold two elements per byte, element 0 in the low nibble; uint1
  holds eight per byte, element 0 in the least significant bit;
* fp6 is read one element per byte (low 6 bits) when the payload has one byte
  per element, or packed four elements per three bytes, little-endian bit order;
* complex32 is a pair of fp16 (re, im) and decodes to complex64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

DTYPE_NAMES: dict[int, str] = {
    0: "float", 1: "float16", 2: "int8", 3: "int32", 4: "uint8", 6: "int16", 7: "uint16",
    8: "uint32", 9: "int64", 10: "uint64", 11: "double", 12: "bool", 13: "string",
    16: "complex64", 17: "complex128", 27: "bf16", 29: "int4", 30: "uint1", 33: "complex32",
    34: "hifloat8", 35: "float8_e5m2", 36: "float8_e4m3fn", 37: "float8_e8m0",
    38: "float6_e3m2", 39: "float6_e2m3", 40: "float4_e2m1", 41: "float4_e1m2", -1: "undefined",
}
DTYPE_CODES: dict[str, int] = {v: k for k, v in DTYPE_NAMES.items()}

FORMAT_NAMES: dict[int, str] = {
    0: "nchw", 1: "nhwc", 2: "nd", 3: "nc1hwc0", 4: "fractal_z", 12: "nc1hwc0_c04", 16: "hwcn",
    27: "ndhwc", 29: "fractal_nz", 30: "ncdhw", 32: "ndc1hwc0", 33: "fractal_z_3d", 35: "nc",
    47: "ncl", 50: "fractal_nz_c0_16", 51: "fractal_nz_c0_32",
}


def dtype_name(code: int) -> str:
    return DTYPE_NAMES.get(code, f"undefined({code})")


def format_name(code: int) -> str:
    return FORMAT_NAMES.get(code, f"undefined({code})")


def _fp4_e1m2_table() -> np.ndarray:
    """fp4 e1m2 (sign, 1 exponent bit, 2 mantissa bits, bias 1, no Inf/NaN):
    exponent 0 is subnormal, m/4; exponent 1 is 1 + m/4."""
    codes = np.arange(16)
    mag = np.where(codes & 0b0100, 1.0 + (codes & 0b11) / 4, (codes & 0b11) / 4)
    return np.where(codes & 0b1000, -mag, mag).astype(np.float32)


def _hifloat8_table() -> np.ndarray:
    """Ascend HiFloat8: sign, a prefix-coded "dot" field giving the exponent width
    D (11: 4, 10: 3, 01: 2, 001: 1, 0001: 0), the exponent in sign-magnitude with
    an implicit leading 1 (D >= 1), then the mantissa in the remaining bits.
    0000 is the subnormal range 2^(m-23); 0x00 is zero, 0x80 NaN, 0x6F/0xEF ±Inf."""
    out = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        mag = code & 0x7F
        if (mag >> 5) in (3, 2, 1):  # dot 11, 10, 01: exponent sign at bit 4
            d = {3: 4, 2: 3, 1: 2}[mag >> 5]
            mbits = 5 - d
            emag = (1 << (d - 1)) | ((mag >> mbits) & ((1 << (d - 1)) - 1))
            exp = -emag if mag & 0x10 else emag
        elif mag >> 4 == 1:  # dot 001: D=1, exponent sign at bit 3, magnitude 1
            mbits, exp = 3, (-1 if mag & 0x08 else 1)
        elif mag >> 3 == 1:  # dot 0001: D=0
            mbits, exp = 3, 0
        else:  # dot 0000: subnormal
            out[code] = 0.0 if mag == 0 else sign * 2.0 ** ((mag & 0x07) - 23)
            continue
        man = mag & ((1 << mbits) - 1)
        out[code] = sign * 2.0 ** exp * (1 + man / (1 << mbits))
    out[0x80] = np.nan
    out[0x6F], out[0xEF] = np.inf, -np.inf
    return out.astype(np.float32)


# Formats ml_dtypes decodes (our name -> its type's name): each element's code,
# one per byte, is viewed as its ml_dtypes type and widened to float32.
_ML_DTYPES: dict[str, str] = {
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
    "float8_e8m0": "float8_e8m0fnu", "float6_e3m2": "float6_e3m2fn",
    "float6_e2m3": "float6_e2m3fn", "float4_e2m1": "float4_e2m1fn",
}
_TABLES: dict[str, np.ndarray] = {}


def _to_float32(name: str, codes: np.ndarray) -> np.ndarray:
    if name in _ML_DTYPES:
        import ml_dtypes  # see the module's docstring: not on every command's path
        ml_type = getattr(ml_dtypes, _ML_DTYPES[name])
        return np.ascontiguousarray(codes).view(ml_type).astype(np.float32)
    if name not in _TABLES:
        _TABLES[name] = {"hifloat8": _hifloat8_table, "float4_e1m2": _fp4_e1m2_table}[name]()
    return _TABLES[name][codes]


def _nibbles(raw: np.ndarray, n: int) -> np.ndarray:
    out = np.empty(raw.size * 2, dtype=np.uint8)
    out[0::2] = raw & 0x0F
    out[1::2] = raw >> 4
    return out[:n]


def _fp6_codes(raw: np.ndarray, n: int) -> np.ndarray:
    if raw.size == n:
        return raw & 0x3F
    bits = np.unpackbits(raw, bitorder="little")[: n * 6].reshape(n, 6)
    return (bits.astype(np.uint8) << np.arange(6, dtype=np.uint8)).sum(axis=1).astype(np.uint8)


@dataclass(frozen=True)
class DtypeSpec:
    """How a dtype is stored: `nbytes(n)` payload bytes for n elements, and a
    decoder from the payload (uint8) to a flat array of n elements."""

    name: str
    nbytes: Callable[[int], tuple[int, ...]]
    decode: Callable[[np.ndarray, int, bool], np.ndarray]


def _native(np_dtype: str) -> DtypeSpec:
    dt = np.dtype(np_dtype)
    return DtypeSpec(np_dtype, lambda n: (n * dt.itemsize,),
                     lambda raw, n, _r: raw.view(dt)[:n])


def _lut(name: str, packing: str) -> DtypeSpec:
    """A minifloat decoded through a table; packing: byte, nibble or fp6."""
    sizes = {
        "byte": lambda n: (n,),
        "nibble": lambda n: ((n + 1) // 2,),
        "fp6": lambda n: (n, (n * 6 + 7) // 8),
    }[packing]

    def decode(raw: np.ndarray, n: int, raw_bits: bool) -> np.ndarray:
        codes = {"byte": lambda: raw[:n], "nibble": lambda: _nibbles(raw, n),
                 "fp6": lambda: _fp6_codes(raw, n)}[packing]()
        return codes if raw_bits else _to_float32(name, codes)

    return DtypeSpec(name, sizes, decode)


def _bf16(raw: np.ndarray, n: int, raw_bits: bool) -> np.ndarray:
    bits = raw.view(np.uint16)[:n]
    return bits if raw_bits else (bits.astype(np.uint32) << 16).view(np.float32)


def _int4(raw: np.ndarray, n: int, raw_bits: bool) -> np.ndarray:
    if raw_bits:
        return raw
    v = _nibbles(raw, n).astype(np.int8)
    return np.where(v >= 8, v - 16, v).astype(np.int8)


def _uint1(raw: np.ndarray, n: int, raw_bits: bool) -> np.ndarray:
    return raw if raw_bits else np.unpackbits(raw, bitorder="little")[:n]


def _complex32(raw: np.ndarray, n: int, raw_bits: bool) -> np.ndarray:
    halves = raw.view(np.float16)[: 2 * n]
    if raw_bits:
        return halves.view(np.uint16)
    return halves.astype(np.float32).view(np.complex64)


SPECS: dict[int, DtypeSpec] = {
    0: _native("float32"), 1: _native("float16"), 2: _native("int8"), 3: _native("int32"),
    4: _native("uint8"), 6: _native("int16"), 7: _native("uint16"), 8: _native("uint32"),
    9: _native("int64"), 10: _native("uint64"), 11: _native("float64"),
    12: DtypeSpec("bool", lambda n: (n,), lambda raw, n, r: raw[:n] if r else raw[:n] != 0),
    13: DtypeSpec("string", lambda n: (n,), lambda raw, n, _r: raw),
    16: _native("complex64"), 17: _native("complex128"),
    27: DtypeSpec("bf16", lambda n: (2 * n,), _bf16),
    29: DtypeSpec("int4", lambda n: ((n + 1) // 2,), _int4),
    30: DtypeSpec("uint1", lambda n: ((n + 7) // 8,), _uint1),
    33: DtypeSpec("complex32", lambda n: (4 * n,), _complex32),
    34: _lut("hifloat8", "byte"), 35: _lut("float8_e5m2", "byte"),
    36: _lut("float8_e4m3fn", "byte"), 37: _lut("float8_e8m0", "byte"),
    38: _lut("float6_e3m2", "fp6"), 39: _lut("float6_e2m3", "fp6"),
    40: _lut("float4_e2m1", "nibble"), 41: _lut("float4_e1m2", "nibble"),
}

# Default relative/absolute tolerances per dtype name, for compare. About two
# units in the last place of the type's mantissa (fp16 2^-10, bf16 2^-7, fp32
# ~2^-17 to leave room for accumulation order); integer and bool types must match.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float": (1e-5, 1e-5), "double": (1e-12, 1e-12), "float16": (1e-3, 1e-3),
    "bf16": (8e-3, 8e-3), "complex32": (1e-3, 1e-3), "complex64": (1e-5, 1e-5),
    "complex128": (1e-12, 1e-12), "float8_e4m3fn": (0.125, 0.125),
    "float8_e5m2": (0.25, 0.25), "float8_e8m0": (0.5, 0.0), "hifloat8": (0.125, 0.125),
    "float6_e3m2": (0.25, 0.25), "float6_e2m3": (0.125, 0.125),
    "float4_e2m1": (0.5, 0.5), "float4_e1m2": (0.25, 0.25),
}


def tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for values of this dtype name; exact (0, 0) for integers."""
    return TOLERANCES.get(dtype, (0.0, 0.0))


def is_float_name(dtype: str) -> bool:
    return dtype in TOLERANCES
