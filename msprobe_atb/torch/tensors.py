"""A module's arguments and outputs as the torch dumper writes them: the tensors in a
fixed order with their names, their ATB dtype codes, host bytes and statistics.

Order (the index i of `intensor{i}` / `outtensor{i}`): positional arguments, then
keyword arguments in the order of the call; inside each, depth first: a tuple or list
element by element, a dict (a Hugging Face ModelOutput too) in its key order. A
tensor reached through a keyword or a dict key carries that name as the file's
`_{name}` suffix (`intensor1_position_embeddings_0.bin`), as ATB suffixes an
operation's IR names; one reached by position only has none. Anything that is not a
tensor (None, ints, a KV cache object) is skipped and counted.
"""

from __future__ import annotations

import math
import re
from typing import Any

import ml_dtypes
import numpy as np
import torch

from msprobe_atb.offline.read.dtypes import DTYPE_CODES
from msprobe_atb.offline.read.tensorstats import tensor_stats

MAX_DEPTH = 8  # nesting followed into tuples, lists and dicts
# A view that repeats its elements (a broadcast: stride 0) is copied whole to be
# written; beyond this many bytes, and more than twice its storage, it is not.
MAX_EXPANDED = 256 << 20
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")

# torch dtype -> our dtype name (offline/read/dtypes.py has the code of each)
_NAMES = {
    torch.float32: "float", torch.float16: "float16", torch.bfloat16: "bf16",
    torch.float64: "double", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.bool: "bool",
    torch.complex64: "complex64", torch.complex128: "complex128",
}
for _attr, _name in (("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
                     ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        _NAMES[getattr(torch, _attr)] = _name
CODES: dict[torch.dtype, int] = {t: DTYPE_CODES[n] for t, n in _NAMES.items()}
# dtypes numpy has no type for: viewed through ml_dtypes for the statistics
_ML = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16)}
for _attr, _ml in (("float8_e4m3fn", ml_dtypes.float8_e4m3fn),
                   ("float8_e5m2", ml_dtypes.float8_e5m2)):
    if hasattr(torch, _attr):
        _ML[getattr(torch, _attr)] = (torch.uint8, _ml)
_NO_STATS = {torch.complex64, torch.complex128}  # the shim's [re, im] form is not made here


def _suffix(name: str) -> str:
    return _UNSAFE.sub("_", name)[:MAX_NAME]


def flatten(args: tuple, kwargs: dict | None = None) -> tuple[list[tuple[str, torch.Tensor]], int]:
    """([(name, tensor)] in dump order, number of non-tensor values skipped)."""
    out: list[tuple[str, torch.Tensor]] = []
    skipped = 0

    def walk(value: Any, name: str, depth: int) -> None:
        nonlocal skipped
        if isinstance(value, torch.Tensor):
            out.append((name, value))
        elif depth < MAX_DEPTH and isinstance(value, (tuple, list)):
            for k, item in enumerate(value):
                walk(item, f"{name}_{k}" if name else "", depth + 1)
        elif depth < MAX_DEPTH and isinstance(value, dict):
            for key, item in value.items():
                key = _suffix(str(key))
                walk(item, f"{name}_{key}" if name else key, depth + 1)
        else:
            skipped += 1

    for value in args:
        walk(value, "", 0)
    for key, value in (kwargs or {}).items():
        walk(value, _suffix(str(key)), 0)
    return out, skipped


def file_name(kind: str, index: int, name: str) -> str:
    """`intensor0.bin`, `outtensor0_logits.bin` (kind: intensor / outtensor)."""
    return f"{kind}{index}_{name[:MAX_NAME]}.bin" if name else f"{kind}{index}.bin"


class TooExpanded(ValueError):
    """A view whose copy would be far larger than what it holds; the message says so."""


def check_expansion(t: torch.Tensor) -> None:
    """Raises TooExpanded, before anything is allocated, for a view that repeats its
    elements into more than MAX_EXPANDED bytes (4 bytes expanded to 2^30 elements
    would be copied into 4 GiB)."""
    expanded = t.numel() * t.element_size()
    if expanded <= MAX_EXPANDED:
        return
    stored = t.untyped_storage().nbytes()
    if expanded > 2 * stored:
        raise TooExpanded(f"a view of {stored} bytes of storage repeated to "
                          f"{list(t.shape)} ({expanded} bytes, strides "
                          f"{list(t.stride())}); not copied: a view that repeats its "
                          f"elements is written up to {MAX_EXPANDED} bytes")


def host(t: torch.Tensor) -> torch.Tensor:
    """The tensor as it is written: detached, on the host, contiguous."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    return t.contiguous()


def payload(t: torch.Tensor) -> memoryview:
    """The host tensor's bytes, in place."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy())


def _array(t: torch.Tensor) -> np.ndarray:
    if t.dtype in _ML:
        raw, ml = _ML[t.dtype]
        return t.view(raw).numpy().view(ml)
    return t.numpy()


def _value(v: Any) -> Any:
    """A statistic as the record log holds it: non-finite doubles as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def stats(t: torch.Tensor) -> tuple[dict | None, str | None]:
    """(the record's `stats` object, or None with the note saying why)."""
    if t.numel() == 0:
        return None, "empty tensor"
    if t.dtype in _NO_STATS:
        return None, f"unsupported dtype {_NAMES[t.dtype]}"
    return {k: _value(v) for k, v in tensor_stats(_array(t)).items()}, None
