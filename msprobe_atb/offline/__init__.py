"""Offline inspection of `atb_dump_data` trees.

    from msprobe_atb.offline import load_bin, open_dump
    arr = load_bin("…/after/outtensor0.bin")          # numpy, aliases followed
    dump = open_dump("out/")                          # dump.tensors: polars DataFrame
    bad = dump.filter(layer="3", round="0-1").filter(pl.col("nonfinite"))

Modules: dtypes (codes, decoders), binfile (.bin reader), layout (finding the
tree), table (the tensor table), tensorstats, graph (info/layer dataflow),
summary (stats), metrics + compare, overflow, convert, report, cli.
"""

from .binfile import BinFileError, BinHeader, TensorNotSaved, load_bin, read_header, resolve
from .compare import CompareResult, compare_dumps
from .layout import DumpNotFound
from .table import Dump, filter_tensors, open_dump

__all__ = [
    "BinFileError", "BinHeader", "CompareResult", "Dump", "DumpNotFound", "TensorNotSaved",
    "compare_dumps", "filter_tensors", "load_bin", "open_dump", "read_header", "resolve",
]
