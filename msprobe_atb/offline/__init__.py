"""Offline inspection of `atb_dump_data` trees.

    from msprobe_atb.offline import load_bin, open_dump
    arr = load_bin("…/after/outtensor0.bin")          # numpy, aliases followed
    dump = open_dump("out/")                          # dump.tensors: polars DataFrame
    bad = dump.filter(layer="3", round="0-1").filter(pl.col("nonfinite"))

Rooms, by what a user runs: read (dtypes, binfile, layout, table, manifest, ...:
reading a dump), stats (stats, overflow), compare (pairing, metrics, engines, the torch
golden), report, manifest (index, query), replay, diagnose (the root cause, which stats,
compare, report and incidents show), incidents (the flight recorder's reports, with their
replay and diagnosis); cli registers their commands.
"""

import importlib

# Each public name and the module defining it. They are imported when first used, so
# `msprobe-atb --version` and the control plane never pay for numpy, ml_dtypes and polars.
_EXPORTS = {
    "BinFileError": "read.binfile", "BinHeader": "read.binfile", "TensorNotSaved": "read.binfile",
    "load_bin": "read.binfile", "read_header": "read.binfile", "resolve": "read.binfile",
    "CompareResult": "compare.dumps", "compare_dumps": "compare.dumps",
    "DumpNotFound": "read.layout",
    "Dump": "read.table", "filter_tensors": "read.table", "open_dump": "read.table",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
