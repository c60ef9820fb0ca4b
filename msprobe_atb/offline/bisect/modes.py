"""How one op of a chained run computes its outputs from its chained inputs.

`promoted`: the op's float64 reference (replay/refs.py), kept in float64 for its
consumers, rounded to its dump dtype only where the graph stores the result as state
for later rounds (the KV cache: a promoted op still writes a cache of the deployed
dtype). `emulated`: the promoted result rounded to the output dtype, what a correct
kernel of that dtype gives; the run of every op so is the dtype's own noise, the
default target. `deployed`: the emulated result plus the op's own error as the dump
measured it (its dumped output minus its float64 reference on its dumped inputs,
rounded to the dtype), rounded again: on its dumped inputs it gives its dumped output
back exactly, a correct kernel (no own error) is its emulation, and a kernel with its
own precision defect keeps that defect (docs/bisect.md says why).
"""

from __future__ import annotations

import numpy as np

from ..replay.refs import Terms

# Ops whose outputs are state the graph keeps in its dtype for later rounds.
STORED_OUTPUTS = {"ReshapeAndCacheOperation"}


def values(outs: list) -> list[np.ndarray]:
    """A reference's outputs as float64 arrays (a sum's Terms unwrapped)."""
    return [np.asarray(o.value if isinstance(o, Terms) else o, dtype=np.float64) for o in outs]


def _bf16(x: np.ndarray) -> np.ndarray:
    """Rounded to bfloat16 (to nearest, ties to even), as float32."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(f), f, r)


_ROUNDING = {"float16": lambda x: x.astype(np.float16).astype(np.float32),
             "float": lambda x: x.astype(np.float32),
             "bf16": _bf16}


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """`x` rounded to a dump dtype, held in float32, which holds each of those values
    exactly in half the memory of float64 (float64 and integer dtypes: unchanged)."""
    fn = _ROUNDING.get(dtype)
    if fn is None:
        return x
    with np.errstate(over="ignore", invalid="ignore"):
        return fn(x)


def promoted(op_type: str, outs: list[np.ndarray], dtypes: list[str]) -> list[np.ndarray]:
    if op_type in STORED_OUTPUTS:
        return [rounded(o, d) for o, d in zip(outs, dtypes)]
    return outs


def deployed(outs: list[np.ndarray], own_error: list[np.ndarray | None],
             dtypes: list[str]) -> list[np.ndarray]:
    with np.errstate(invalid="ignore", over="ignore"):
        return [rounded(o, d) if e is None else rounded(rounded(o, d) + e, d)
                for o, e, d in zip(outs, own_error, dtypes)]


def emulated(outs: list[np.ndarray], dtypes: list[str]) -> list[np.ndarray]:
    return [rounded(o, d) for o, d in zip(outs, dtypes)]


def own_error(reference: list[np.ndarray], dumped: list[np.ndarray],
              dtypes: list[str]) -> list[np.ndarray | None]:
    """The op's own error as dumped: its dumped outputs minus its float64 reference on
    its dumped inputs rounded to the dtype (0 where the kernel rounded correctly; None
    for an output without any, the rule for a correct kernel)."""
    out: list[np.ndarray | None] = []
    with np.errstate(invalid="ignore", over="ignore"):
        for d, r, t in zip(dumped, reference, dtypes):
            e = d.astype(np.float64) - rounded(r, t)
            out.append(e if np.any(e != 0) else None)  # NaN != 0: kept
    return out


def reproduces(made: list[np.ndarray], dumped: list[np.ndarray]) -> bool:
    """Whether a deployed result equals the dumped outputs (NaN where they hold NaN)."""
    for m, d in zip(made, dumped):
        d = d.astype(np.float64)
        if m.shape != d.shape or not np.array_equal(m, d, equal_nan=True):
            return False
    return True
