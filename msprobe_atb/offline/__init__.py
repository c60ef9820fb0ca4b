"""Offline inspection of `atb_dump_data` trees.

    from msprobe_atb.offline import load_bin, open_dump
    arr = load_bin("…/after/outtensor0.bin")          # numpy, aliases followed
    dump = open_dump("out/")                          # dump.tensors: polars DataFrame
    bad = dump.filter(layer="3", round="0-1").filter(pl.col("nonfinite"))

Modules: dtypes (codes, decoders), binfile (.bin reader), layout (finding the
tree), table (the tensor table), tensorstats, graph (info/layer dataflow),
summary (stats), metrics + compare, overflow, convert, report, cli.
"""

import importlib

# Each public name and the module defining it. They are imported when first used, so
# `msprobe-atb --version` and the control plane never pay for numpy, ml_dtypes and polars.
_EXPORTS = {
    "BinFileError": "binfile", "BinHeader": "binfile", "TensorNotSaved": "binfile",
    "load_bin": "binfile", "read_header": "binfile", "resolve": "binfile",
    "CompareResult": "compare", "compare_dumps": "compare",
    "DumpNotFound": "layout",
    "Dump": "table", "filter_tensors": "table", "open_dump": "table",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
