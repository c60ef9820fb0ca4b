"""msProbe's names for ATB's numeric dtype and format enums (docs/msprobe_format.md §7, §8.3)."""

from __future__ import annotations

DTYPE_NAMES = {
    0: "float", 1: "float16", 2: "int8", 3: "int32", 4: "uint8", 6: "int16", 7: "uint16",
    8: "uint32", 9: "int64", 10: "uint64", 11: "double", 12: "bool", 13: "string",
    16: "complex64", 17: "complex128", 27: "bf16", 29: "int4", 30: "uint1", 33: "complex32",
    34: "hifloat8", 35: "float8_e5m2", 36: "float8_e4m3fn", 37: "float8_e8m0",
    38: "float6_e3m2", 39: "float6_e2m3", 40: "float4_e2m1", 41: "float4_e1m2",
}

FORMAT_NAMES = {
    0: "nchw", 1: "nhwc", 2: "nd", 3: "nc1hwc0", 4: "fractal_z", 12: "nc1hwc0_c04", 16: "hwcn",
    27: "ndhwc", 29: "fractal_nz", 30: "ncdhw", 32: "ndc1hwc0", 33: "fractal_z_3d", 35: "nc",
    47: "ncl", 50: "fractal_nz_c0_16", 51: "fractal_nz_c0_32",
}


def _as_int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _name(table: dict[int, str], value: object) -> str:
    n = _as_int(value)
    if n is None:
        return f"undefined({value})"
    return table.get(n, f"undefined({n})")


def dtype_name(value: object) -> str:
    return _name(DTYPE_NAMES, value)


def format_name(value: object) -> str:
    return _name(FORMAT_NAMES, value)
