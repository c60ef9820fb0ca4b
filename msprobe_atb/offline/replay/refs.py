"""Float64 reference implementations of ATB operations, one per op type.

Each reference takes the op's param JSON (the keys of ATB's public
`include/atb/infer_op_params.h`, as ATB writes them into `op_param.json`) and the
op's dumped inputs as float64 (integers stay integers), and returns its outputs in
float64. A param value or an input form a reference does not implement raises
NotReplayable naming it: a reference never approximates what it was not written
for. Defaults are the header's defaults, so a key ATB leaves out means what ATB
means by it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


class NotReplayable(Exception):
    """The op cannot be recomputed from the dump; the message says why."""


@dataclass
class Terms:
    """An output whose elements are sums of terms that may cancel: its value, and how
    to get each element's sum of its terms' magnitudes (what its rounding can lose
    scales with them; tolerances.py). Made only where the value alone does not settle
    the verdict."""
    value: np.ndarray
    magnitude: Callable[[], np.ndarray]


Arrays = list[np.ndarray]
Reference = Callable[[dict, Arrays], "list[np.ndarray | Terms]"]
REFERENCES: dict[str, Reference] = {}
# Inputs that legitimately hold -inf (additive attention masks): not "input-bad".
MASK_INPUTS: dict[str, Callable[[dict, int], set[int]]] = {}
# The shapes of an op's results from its param and its inputs' shapes, for the ops
# whose results can be far larger than their inputs (a product, a broadcast, a
# gather): the runner holds them against the dumped outputs before computing.
Shapes = Callable[[dict, Arrays], "list[tuple[int, ...]]"]
RESULT_SHAPES: dict[str, Shapes] = {}


def reference(op_type: str):
    def register(fn: Reference) -> Reference:
        REFERENCES[op_type] = fn
        return fn
    return register


def _shown(v) -> str:
    """A param value as the message shows it: JSON text, at most 60 characters."""
    try:
        text = json.dumps(v, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _get(param: dict, key: str, default):
    v = param.get(key, default)
    return default if v is None else v


def _int(param: dict, key: str, default: int) -> int:
    """An integer param (a float with an integral value too, as JSON may write it)."""
    v = _get(param, key, default)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return int(v)
    raise NotReplayable(f"{key}={_shown(v)} is not an integer")


def _float(param: dict, key: str, default: float) -> float:
    v = _get(param, key, default)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    raise NotReplayable(f"{key}={_shown(v)} is not a finite number")


def _flag(param: dict, key: str, default: bool) -> bool:
    v = _get(param, key, default)
    if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
        return bool(v)
    raise NotReplayable(f"{key}={_shown(v)} is not true or false")


def _ints(param: dict, key: str, default: list[int]) -> list[int]:
    """A list of integers (a single integer is a list of one)."""
    v = _get(param, key, default)
    items = v if isinstance(v, list) else [v]
    if all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        return items
    raise NotReplayable(f"{key}={_shown(v)} is not a list of integers")


def _axis(key: str, value: int, ndim: int) -> int:
    """A dim index of a tensor of `ndim` dims (negative from the end), as 0..ndim-1."""
    if not -ndim <= value < ndim:
        raise NotReplayable(f"{key}={value} is outside the input's {ndim} dims")
    return value % ndim


def _only(param: dict, key: str, allowed: tuple, default, what: str = ""):
    """The value of `key`, refused unless it is one of `allowed`."""
    v = _get(param, key, default)
    if v not in allowed:
        names = ", ".join(map(str, allowed))
        raise NotReplayable(f"{key}={_shown(v)}{what} is not implemented (replay implements "
                            f"{names})")
    return v


def _param(param: dict, key: str) -> dict:
    """A nested param object ({} when absent)."""
    v = _get(param, key, {})
    if not isinstance(v, dict):
        raise NotReplayable(f"{key}={_shown(v)} is not an object")
    return v


def _need(inputs: Arrays, n: int, form: str) -> None:
    if len(inputs) < n:
        raise NotReplayable(f"needs {n} inputs ({form}), the dump has {len(inputs)}")


def _rows(x: np.ndarray) -> np.ndarray:
    """[..., width] -> [tokens, width]."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


# ---- Linear ------------------------------------------------------------------------


def _linear_form(param: dict, inputs: Arrays) -> tuple[np.ndarray, bool, bool, int]:
    """(x as used, transposeB, hasBias, n): the param checked, the shapes fitting."""
    _only(param, "enAccum", (False,), False)
    _only(param, "matmulType", (0,), 0, " (MATMUL_EIN_SUM)")
    _only(param, "quantMode", (0,), 0, " (quantized matmul)")
    has_bias = _flag(param, "hasBias", True)
    _need(inputs, 3 if has_bias else 2, "x, weight" + (", bias" if has_bias else ""))
    x, w = inputs[0], inputs[1]
    if _flag(param, "transposeA", False):
        if x.ndim != 2:
            raise NotReplayable(f"transposeA with a {x.ndim}-d x is not implemented (2-d only)")
        x = x.T
    if w.ndim != 2:
        raise NotReplayable(f"a {w.ndim}-d weight is not implemented (2-d only)")
    if x.ndim == 0:
        raise NotReplayable("a 0-d x does not multiply")
    trans_b = _flag(param, "transposeB", True)
    k, n = (w.shape[1], w.shape[0]) if trans_b else w.shape
    if x.shape[-1] != k:
        raise NotReplayable(f"x {list(x.shape)} and weight {list(w.shape)} do not multiply")
    if has_bias and inputs[2].size != n:
        raise NotReplayable(f"a bias of {inputs[2].size} elements for {n} output columns")
    return x, trans_b, has_bias, n


def _matmul(x: np.ndarray, w: np.ndarray, trans_b: bool, n: int, of=lambda a: a) -> np.ndarray:
    """x @ w (w transposed if trans_b) of `of` applied to both, in float64, blocks of
    output columns at a time with the weight's block in float64: a 4096 x 16384 fp16
    weight would take 512 MiB as one float64 copy."""
    x = of(x.astype(np.float64))
    y = np.empty((*x.shape[:-1], n))
    for j in range(0, n, _COLUMNS):
        block = of(_columns(w, trans_b, j).astype(np.float64))
        y[..., j:j + _COLUMNS] = x @ (block.T if trans_b else block)
    return y


def _columns(w: np.ndarray, trans_b: bool, j: int) -> np.ndarray:
    """The weight's part that makes output columns j .. j + _COLUMNS."""
    return w[j:j + _COLUMNS] if trans_b else w[:, j:j + _COLUMNS]


# float16 and bfloat16 (read as float32) convert to float32 exactly.
_EXACT_IN_FLOAT32 = (np.float16, np.float32)


def _abs_matmul(x: np.ndarray, w: np.ndarray, trans_b: bool, n: int) -> np.ndarray:
    """|x| @ |w|, never above it: it only scales a tolerance, so it is computed in
    float32 where x and w hold in float32 exactly (fp16, bf16, fp32; sgemm is about
    twice dgemm). A sum of k non-negative float32 products, in any order, is within
    g = k * 2^-24 / (1 - k * 2^-24) of its exact value, relatively (an underflow adds at
    most k * 2^-149, far below every dtype's floor), so dividing by 1 + g keeps it at or
    below: the tolerance is never looser than with the exact magnitude. A block that
    leaves float32's range is redone in float64, as are other inputs and a k too large
    for the bound."""
    k = x.shape[-1]
    bound = k * 2.0 ** -24
    if x.dtype.type not in _EXACT_IN_FLOAT32 or w.dtype.type not in _EXACT_IN_FLOAT32 or \
            bound >= 0.5:
        return _matmul(x, w, trans_b, n, np.abs)
    shrink = 1.0 / (1.0 + bound / (1.0 - bound))
    x32 = np.abs(x.astype(np.float32, copy=False))
    y = np.empty((*x.shape[:-1], n))
    for j in range(0, n, _COLUMNS):
        block = np.abs(_columns(w, trans_b, j).astype(np.float32, copy=False))
        part = x32 @ (block.T if trans_b else block)
        if not np.isfinite(part).all():
            part = np.abs(x.astype(np.float64)) @ (block.T if trans_b else block).astype(
                np.float64)
        np.multiply(part, shrink, out=y[..., j:j + _COLUMNS])
    return y


@reference("LinearOperation")
def linear(param: dict, inputs: Arrays) -> Arrays:
    """The float64 product itself (dgemm), never sgemm within a bound of it: the
    verdicts could be settled so, but not the metrics replay prints. The cosine (17
    digits in JSON) moves with every element's reference, and at k 4096 sgemm's
    rigorous bound (k 2^-24 of the terms' magnitude, 1.5% of a typical |r|) leaves it
    open from the second digit."""
    x, trans_b, has_bias, n = _linear_form(param, inputs)
    w = inputs[1]
    y = _matmul(x, w, trans_b, n)
    bias = inputs[2].astype(np.float64).reshape(-1) if has_bias else 0.0
    y += bias

    def magnitude() -> np.ndarray:
        return _abs_matmul(x, w, trans_b, n) + np.abs(bias)
    return [Terms(y, magnitude)]


def _linear_shapes(param: dict, inputs: Arrays) -> list[tuple[int, ...]]:
    x, _, _, n = _linear_form(param, inputs)
    return [(*x.shape[:-1], n)]


RESULT_SHAPES["LinearOperation"] = _linear_shapes
_COLUMNS = 512


# ---- RmsNorm -----------------------------------------------------------------------


@reference("RmsNormOperation")
def rms_norm(param: dict, inputs: Arrays) -> Arrays:
    _only(param, "layerType", (1,), 0, " (replay implements RMS_NORM_NORM)")
    norm = _param(param, "normParam")
    _only(norm, "quantType", (0,), 0, " (quantized norm)")
    _only(norm, "dynamicQuantType", (0,), 0)
    _only(norm, "rstd", (False,), False)
    gemma = _only(norm, "modelType", (0, 1), 0) == 1
    eps = _float(norm, "epsilon", 1e-5)
    _need(inputs, 2, "x, gamma")
    x, gamma = inputs[0].astype(np.float64), inputs[1].astype(np.float64).reshape(-1)
    if not x.ndim or gamma.size != x.shape[-1]:
        raise NotReplayable(f"gamma has {gamma.size} elements, x's last dim is {x.shape[-1]}")
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return [y * ((1.0 + gamma) if gemma else gamma)]


# ---- Rope --------------------------------------------------------------------------


def _rope_one(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, coeff: int) -> Terms:
    head_dim = cos.shape[-1]
    rows = _rows(x).astype(np.float64)
    if rows.shape[0] != cos.shape[0] or rows.shape[1] % head_dim:
        raise NotReplayable(f"x {list(x.shape)} does not match cos/sin {list(cos.shape)} "
                            "(one row per token, width a multiple of the head dim)")
    stride = head_dim // coeff
    heads = rows.reshape(rows.shape[0], rows.shape[1] // head_dim, coeff // 2, 2,
                         stride)  # chunks of [a, b]
    rotated = np.concatenate([-heads[..., 1:, :], heads[..., :1, :]], axis=-2)
    c = np.tile(cos, rows.shape[1] // head_dim)
    s = np.tile(sin, rows.shape[1] // head_dim)
    a, b = rows * c, rotated.reshape(rows.shape) * s
    return Terms((a + b).reshape(x.shape), lambda: np.abs(a) + np.abs(b))


@reference("RopeOperation")
def rope(param: dict, inputs: Arrays) -> Arrays:
    # q, k, cos, sin, seqlen. cos/sin hold one row per token, so seqlen only splits
    # the tokens into batches and does not change the result.
    _only(param, "cosFormat", (0,), 0)
    _need(inputs, 4, "query, key, cos, sin, seqlen")
    cos, sin = (_rows(t).astype(np.float64) for t in inputs[2:4])
    if cos.shape != sin.shape:
        raise NotReplayable(f"cos {list(inputs[2].shape)} and sin {list(inputs[3].shape)} "
                            "differ")
    coeff = _int(param, "rotaryCoeff", 4)
    head_dim = cos.shape[-1]
    if not head_dim:
        raise NotReplayable(f"cos {list(inputs[2].shape)} has no head dim")
    if coeff < 2 or coeff % 2 or head_dim % coeff:
        raise NotReplayable(f"rotaryCoeff={coeff} does not divide the head dim {head_dim} "
                            "into rotation pairs")
    return [_rope_one(inputs[0], cos, sin, coeff), _rope_one(inputs[1], cos, sin, coeff)]


# ---- attention ---------------------------------------------------------------------


def _heads(x: np.ndarray, n: int, what: str) -> np.ndarray:
    """[tokens, n*d] or [tokens, n, d] -> [tokens, n, d], in the dumped dtype (a head
    is cast to float64 when it is used)."""
    if x.ndim == 3 and x.shape[1] == n:
        return x
    if x.ndim == 2 and x.shape[1] % n == 0:
        return x.reshape(x.shape[0], n, x.shape[1] // n)
    raise NotReplayable(f"{what} {list(x.shape)} is not [tokens, {n} heads * dim]")


_QUERY_ROWS = 256


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, q_pos0: int,
            causal: bool, out: np.ndarray, mag: np.ndarray, mask: np.ndarray | None = None,
            qscale: float = 1.0) -> None:
    """q [s, h, d], k/v [t, kvh, d] -> out: float64 [s, h, d], and mag: the magnitude of
    its terms (the weights times |v|); grouped heads share a kv head. One head and at
    most _QUERY_ROWS queries at a time, so the scores stay small."""
    group = q.shape[1] // k.shape[1]
    for h in range(q.shape[1]):
        kh = k[:, h // group].astype(np.float64)
        vh = v[:, h // group].astype(np.float64)
        for i in range(0, q.shape[0], _QUERY_ROWS):
            qh = q[i:i + _QUERY_ROWS, h].astype(np.float64) * qscale
            # Causal: keys past the block's last query are masked for every row of it.
            seen = min(k.shape[0], q_pos0 + i + qh.shape[0]) if causal else k.shape[0]
            scores = (qh @ kh[:seen].T) * scale
            if mask is not None:
                scores += mask[i:i + _QUERY_ROWS, :seen]
            if causal:
                rows = np.arange(i, i + qh.shape[0])[:, None] + q_pos0
                scores[np.arange(seen)[None, :] > rows] = -np.inf
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            out[i:i + _QUERY_ROWS, h] = scores @ vh[:seen]
            mag[i:i + _QUERY_ROWS, h] = scores @ np.abs(vh[:seen])


def _head_counts(param: dict) -> tuple[int, int]:
    heads = _int(param, "headNum", 0)
    if heads <= 0:
        raise NotReplayable(f"headNum={heads} must be positive")
    kv = _int(param, "kvHeadNum", 0) or heads
    if kv < 0:
        raise NotReplayable(f"kvHeadNum={kv} is negative")
    if heads % kv:
        raise NotReplayable(f"headNum={heads} is not a multiple of kvHeadNum={kv}")
    return heads, kv


def _attention_common(param: dict) -> float:
    for key, allowed, default in (("quantType", (0,), 0), ("scaleType", (0,), 0),
                                  ("clampType", (0,), 0), ("inputLayout", (0,), 0),
                                  ("mlaVHeadSize", (0,), 0), ("windowSize", (0,), 0),
                                  ("compressType", (0,), 0)):
        _only(param, key, allowed, default)
    return _float(param, "qkScale", 1.0)


_SELF_MASKS = {0: "no mask", 1: "a mask input", 9: "the causal mask made inside"}


def _self_attention_mask_inputs(param: dict, n_inputs: int) -> set[int]:
    return {3} if param.get("maskType") == 1 else set()


@reference("SelfAttentionOperation")
def self_attention(param: dict, inputs: Arrays) -> Arrays:
    # PA_ENCODER: q, k, v, [mask], seqLen; every batch attends within its own tokens.
    _only(param, "calcType", (3,), 0, " (replay implements PA_ENCODER, calcType 3)")
    mask_type = _only(param, "maskType", tuple(_SELF_MASKS), 0)
    qscale = _float(param, "qScale", 1.0)
    scale = _attention_common(param)
    heads, kv = _head_counts(param)
    with_mask = mask_type == 1
    _need(inputs, 5 if with_mask else 4, "query, key, value, " + ("mask, " if with_mask else "")
          + "seqLen")
    q = _heads(inputs[0], heads, "query")
    k, v = _heads(inputs[1], kv, "key"), _heads(inputs[2], kv, "value")
    if not k.shape[0] == v.shape[0] == q.shape[0] or k.shape[2] != q.shape[2] or \
            v.shape[2] != q.shape[2]:
        raise NotReplayable(f"query {list(q.shape)}, key {list(k.shape)} and value "
                            f"{list(v.shape)} are not one row each per token and head dim")
    lens = inputs[4 if with_mask else 3].astype(np.int64).reshape(-1)
    if lens.sum() != q.shape[0] or (lens < 0).any():
        raise NotReplayable(f"seqLen {lens.tolist()} does not add up to the {q.shape[0]} tokens")
    mask = inputs[3].astype(np.float64) if with_mask else None
    if mask is not None and mask.ndim < 2:
        raise NotReplayable(f"a mask of shape {list(mask.shape)} is not implemented (2-d)")
    longest = int(lens.max()) if lens.size else 0
    if mask is not None and (mask.size != math.prod(mask.shape[-2:])
                             or min(mask.shape[-2:]) < longest):
        raise NotReplayable(f"a mask of shape {list(mask.shape)} is not implemented (one 2-d "
                            "mask for every batch)")
    out, mag, start = np.empty(q.shape), np.empty(q.shape), 0
    for n in lens.tolist():
        sl = slice(start, start + n)
        m = mask.reshape(mask.shape[-2:])[:n, :n] if mask is not None else None
        _attend(q[sl], k[sl], v[sl], scale, 0, mask_type == 9, out[sl], mag[sl], m, qscale)
        start += n
    return [Terms(out.reshape(inputs[0].shape), lambda: mag)]


MASK_INPUTS["SelfAttentionOperation"] = _self_attention_mask_inputs


@reference("PagedAttentionOperation")
def paged_attention(param: dict, inputs: Arrays) -> Arrays:
    # q, keyCache, valueCache, blockTables, contextLens: one new token per batch
    # attends to the first contextLens[b] cache slots its block table lists.
    _only(param, "maskType", (0,), 0, " (replay implements no mask)")
    _only(param, "calcType", (0,), 0, " (parallel decoding)")
    _only(param, "hasQuantOffset", (False,), False)
    scale = _attention_common(param)
    qscale = _float(param, "qScale", 0.0) or 1.0
    heads, kv = _head_counts(param)
    _need(inputs, 5, "query, keyCache, valueCache, blockTables, contextLens")
    kc, vc = inputs[1], inputs[2]
    if kc.ndim != 4 or vc.shape != kc.shape:
        raise NotReplayable(f"key/value caches {list(kc.shape)}/{list(vc.shape)} are not "
                            "[blocks, blockSize, kvHeads, headDim] (ND)")
    blocks, bsize = kc.shape[0], kc.shape[1]
    if not bsize:
        raise NotReplayable(f"key/value caches {list(kc.shape)} have blocks of no slots")
    if kc.shape[2] != kv:
        raise NotReplayable(f"key/value caches {list(kc.shape)} do not hold kvHeadNum={kv} "
                            "heads")
    lens = inputs[4].astype(np.int64).reshape(-1)
    if not lens.size or inputs[3].size % lens.size:
        raise NotReplayable(f"block tables of {inputs[3].size} entries do not split into "
                            f"{lens.size} batches")
    tables = inputs[3].astype(np.int64).reshape(lens.size, -1)
    q = _heads(inputs[0], heads, "query")
    if q.shape[2] != kc.shape[3]:
        raise NotReplayable(f"query {list(q.shape)} and caches {list(kc.shape)} differ in "
                            "head dim")
    if q.shape[0] != lens.size:
        raise NotReplayable(f"{q.shape[0]} query tokens for {lens.size} batches "
                            "(one token per batch is implemented)")
    kflat = kc.reshape(blocks * bsize, kv, kc.shape[-1])
    vflat = vc.reshape(blocks * bsize, kv, vc.shape[-1])
    out, mag = np.empty(q.shape), np.empty(q.shape)
    for b, n in enumerate(lens.tolist()):
        if not 0 <= n <= tables.shape[1] * bsize:
            raise NotReplayable(f"contextLens[{b}]={n} is outside its block table")
        j = np.arange(n)
        block = tables[b, j // bsize]
        if ((block < 0) | (block >= blocks)).any():
            raise NotReplayable(f"block table {b} points outside the {blocks} cache blocks")
        slots = block * bsize + j % bsize
        _attend(q[b:b + 1], kflat[slots], vflat[slots], scale, n - 1, False, out[b:b + 1],
                mag[b:b + 1], qscale=qscale)
    return [Terms(out.reshape(inputs[0].shape), lambda: mag)]


@reference("ReshapeAndCacheOperation")
def reshape_and_cache(param: dict, inputs: Arrays) -> Arrays:
    # key, value, keyCache, valueCache, slotMapping: the caches with each token's
    # key/value row written at its slot (ATB updates them in place).
    _only(param, "compressType", (0,), 0)
    _only(param, "kvCacheCfg", (0,), 0)
    _need(inputs, 5, "key, value, keyCache, valueCache, slotMapping")
    slots = inputs[4].astype(np.int64).reshape(-1)
    outs = []
    for src, cache in ((inputs[0], inputs[2]), (inputs[1], inputs[3])):
        width = math.prod(cache.shape[2:]) if cache.ndim >= 3 else cache.shape[-1] \
            if cache.ndim else 0
        if cache.ndim < 2 or not width:
            raise NotReplayable(f"a cache of shape {list(cache.shape)} has no slots of elements")
        if not slots.size or src.size != slots.size * width:
            raise NotReplayable(f"{list(src.shape)} is not one cache slot of {width} "
                                f"elements for each of the {slots.size} slotMapping entries")
        new = cache.astype(np.float64).copy()
        flat = new.reshape(cache.size // width, width)
        rows = src.astype(np.float64).reshape(slots.size, width)
        if ((slots < 0) | (slots >= flat.shape[0])).any():
            raise NotReplayable(f"slotMapping {slots.tolist()} points outside the "
                                f"{flat.shape[0]} cache slots")
        flat[slots] = rows
        outs.append(new)
    return outs


# ---- element-wise and activations ---------------------------------------------------

def _ones(x: np.ndarray) -> np.ndarray:
    """The magnitude of a bounded result (sin, cos) whose kernel loses an absolute
    amount."""
    return np.ones_like(x)


# type -> (name, function, the magnitude its result's rounding scales with, or None: |r|)
_ELEWISE_UNARY: dict[int, tuple[str, Callable[[np.ndarray], np.ndarray], Callable | None]] = {
    3: ("cos", np.cos, _ones), 4: ("sin", np.sin, _ones), 5: ("neg", np.negative, None),
    7: ("logical not", lambda x: (x == 0).astype(np.float64), None),
    20: ("tanh", np.tanh, None),
}
_ELEWISE_BINARY: dict[int, tuple[str, Callable[[np.ndarray, np.ndarray], np.ndarray], bool]] = {
    8: ("add", np.add, True), 9: ("mul", np.multiply, False),
    10: ("realdiv", np.divide, False),
    11: ("logical and", lambda a, b: ((a != 0) & (b != 0)).astype(np.float64), False),
    12: ("logical or", lambda a, b: ((a != 0) | (b != 0)).astype(np.float64), False),
    13: ("less", lambda a, b: (a < b).astype(np.float64), False),
    14: ("greater", lambda a, b: (a > b).astype(np.float64), False),
    15: ("sub", np.subtract, True), 16: ("equal", lambda a, b: (a == b).astype(np.float64), False),
}  # True: a sum of two terms, which may cancel


def _elewise_kind(param: dict, inputs: Arrays) -> int:
    kind = _int(param, "elewiseType", 0)
    _need(inputs, 2 if kind in _ELEWISE_BINARY else 1, "x, y" if kind in _ELEWISE_BINARY else "x")
    if kind not in (1, 2, *_ELEWISE_UNARY, *_ELEWISE_BINARY):
        known = {1: "cast", 2: "muls", **{k: v[0] for k, v in _ELEWISE_UNARY.items()},
                 **{k: v[0] for k, v in _ELEWISE_BINARY.items()}}
        raise NotReplayable(f"elewiseType={kind} is not implemented (replay implements "
                            f"{', '.join(f'{k} {known[k]}' for k in sorted(known))}; the "
                            "quantization types are not)")
    return kind


@reference("ElewiseOperation")
def elewise(param: dict, inputs: Arrays) -> list[np.ndarray | Terms]:
    kind = _elewise_kind(param, inputs)
    x = inputs[0].astype(np.float64)
    with np.errstate(all="ignore"):
        if kind == 1:  # cast: the value, rounded by the output dtype when judged
            return [x]
        if kind == 2:
            return [x * _float(_param(param, "mulsParam"), "varAttr", 0.0)]
        if kind in _ELEWISE_UNARY:
            _, fn, magnitude = _ELEWISE_UNARY[kind]
            return [Terms(fn(x), lambda: magnitude(x)) if magnitude else fn(x)]
        _, fn, summed = _ELEWISE_BINARY[kind]
        y = inputs[1].astype(np.float64)
        r = fn(x, y)
        return [Terms(r, lambda: np.abs(x) + np.abs(y)) if summed else r]


def _elewise_shapes(param: dict, inputs: Arrays) -> list[tuple[int, ...]]:
    kind = _elewise_kind(param, inputs)
    if kind not in _ELEWISE_BINARY:
        return [inputs[0].shape]
    try:
        return [np.broadcast_shapes(inputs[0].shape, inputs[1].shape)]
    except ValueError:
        raise NotReplayable(f"x {list(inputs[0].shape)} and y {list(inputs[1].shape)} do not "
                            "broadcast") from None


RESULT_SHAPES["ElewiseOperation"] = _elewise_shapes


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf, otypes=[np.float64])(x / math.sqrt(2.0)))


def _fast_gelu(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    with np.errstate(over="ignore"):
        return x * _sigmoid(1.702 * a) * np.exp(0.851 * (x - a))


@reference("ActivationOperation")
def activation(param: dict, inputs: Arrays) -> list[np.ndarray | Terms]:
    kind = _int(param, "activationType", 0)
    _need(inputs, 1, "x")
    x = inputs[0].astype(np.float64)
    with np.errstate(all="ignore"):
        if kind == 1:
            return [np.maximum(x, 0.0)]
        if kind == 2:  # x/2 (1 + tanh or erf): the two terms cancel for x < 0
            mode = _only(param, "geluMode", (0, 1), 0)
            return [Terms(_gelu_tanh(x) if mode == 0 else _gelu_erf(x), lambda: np.abs(x))]
        if kind in (3, 9):  # FAST_GELU, FASTER_GELU_FORWARD: the same formula
            return [_fast_gelu(x)]
        if kind == 4:  # swish; silu is swish with scale 1
            return [x * _sigmoid(_float(param, "scale", 1.0) * x)]
        if kind == 5:
            return [Terms(np.log(x), lambda: _ones(x))]
        if kind == 6:
            dim = _axis("dim", _int(param, "dim", -1), x.ndim) if x.ndim else 0
            if not x.ndim or x.shape[dim] % 2:
                raise NotReplayable(f"swiglu splits dim {dim} of {list(x.shape)} in halves")
            a, b = np.split(x, 2, axis=dim)
            return [a * _sigmoid(a) * b]
        if kind == 8:
            return [_sigmoid(x)]
    raise NotReplayable(f"activationType={kind} is not implemented (replay implements "
                        "1 relu, 2 gelu, 3 fast gelu, 4 swish/silu, 5 log, 6 swiglu forward, "
                        "8 sigmoid, 9 faster gelu)")


# ---- data movement -----------------------------------------------------------------


def _gather_axis(param: dict, inputs: Arrays) -> int:
    _only(param, "batchDims", (0,), 0)
    _need(inputs, 2, "x, indices")
    axis = _int(param, "axis", 0)
    if not 0 <= axis < inputs[0].ndim:
        raise NotReplayable(f"axis={axis} is outside x's {inputs[0].ndim} dims")
    return axis


@reference("GatherOperation")
def gather(param: dict, inputs: Arrays) -> Arrays:
    axis = _gather_axis(param, inputs)
    x, idx = inputs[0].astype(np.float64), inputs[1].astype(np.int64)
    bad = (idx < 0) | (idx >= x.shape[axis])
    if bad.any():
        raise NotReplayable(f"index {int(idx[bad].reshape(-1)[0])} is outside [0, "
                            f"{x.shape[axis]}) of axis {axis}")
    return [np.take(x, idx, axis=axis)]


def _gather_shapes(param: dict, inputs: Arrays) -> list[tuple[int, ...]]:
    axis = _gather_axis(param, inputs)
    x = inputs[0].shape
    return [(*x[:axis], *inputs[1].shape, *x[axis + 1:])]


RESULT_SHAPES["GatherOperation"] = _gather_shapes


@reference("SplitOperation")
def split(param: dict, inputs: Arrays) -> Arrays:
    _need(inputs, 1, "x")
    x = inputs[0].astype(np.float64)
    if not x.ndim:
        raise NotReplayable("a 0-d x does not split")
    dim = _axis("splitDim", _int(param, "splitDim", 0), x.ndim)
    sizes = _ints(param, "splitSizes", [])
    if sizes:
        if any(n < 0 for n in sizes) or sum(sizes) != x.shape[dim]:
            raise NotReplayable(f"splitSizes={_shown(sizes)} do not add up to dim {dim} "
                                f"({x.shape[dim]})")
        return np.split(x, np.cumsum(sizes)[:-1].tolist(), axis=dim)
    n = _int(param, "splitNum", 2)
    if n <= 0 or x.shape[dim] % n:
        raise NotReplayable(f"splitNum={n} does not divide dim {dim} ({x.shape[dim]})")
    return np.split(x, n, axis=dim)


def _softmax_axes(param: dict, ndim: int) -> tuple[int, ...]:
    axes = tuple(_axis("axes", a, ndim) for a in (_ints(param, "axes", [-1]) or [-1]))
    if len(set(axes)) != len(axes):
        raise NotReplayable(f"axes={_shown(list(axes))} name a dim twice")
    return axes


@reference("SoftmaxOperation")
def softmax(param: dict, inputs: Arrays) -> Arrays:
    _need(inputs, 1, "x")
    x = inputs[0].astype(np.float64)
    if not x.ndim:
        raise NotReplayable("a 0-d x has no axis")
    axes = _softmax_axes(param, x.ndim)
    if not x.size:  # nothing to normalise (max has no identity)
        return [x]
    with np.errstate(invalid="ignore"):
        x = x - x.max(axis=axes, keepdims=True)
        e = np.exp(x)
        return [e / e.sum(axis=axes, keepdims=True)]


@reference("TransposeOperation")
def transpose(param: dict, inputs: Arrays) -> Arrays:
    _need(inputs, 1, "x")
    perm = _ints(param, "perm", [])
    if sorted(perm) != list(range(inputs[0].ndim)):
        raise NotReplayable(f"perm={_shown(perm)} is not a permutation of x's "
                            f"{inputs[0].ndim} dims")
    return [np.transpose(inputs[0].astype(np.float64), perm)]


@reference("ConcatOperation")
def concat(param: dict, inputs: Arrays) -> Arrays:
    _need(inputs, 2, "x, y")
    x, y = inputs[:2]
    if not x.ndim or x.ndim != y.ndim:
        raise NotReplayable(f"x {list(x.shape)} and y {list(y.shape)} do not concatenate")
    dim = _axis("concatDim", _int(param, "concatDim", 0), x.ndim)
    if x.shape[:dim] + x.shape[dim + 1:] != y.shape[:dim] + y.shape[dim + 1:]:
        raise NotReplayable(f"x {list(x.shape)} and y {list(y.shape)} differ outside dim {dim}")
    return [np.concatenate([x.astype(np.float64), y.astype(np.float64)], axis=dim)]


# ---- which inputs a reference may take in pieces of rows ----------------------------
# An op whose output row i depends only on row i of some inputs is recomputed a block
# of rows at a time (runner.py), so its float64 temporaries stay small. Each entry
# names those inputs, or None where this op's params or shapes tie rows together.
RowInputs = Callable[[dict, Arrays], "list[int] | None"]
ROW_INPUTS: dict[str, RowInputs] = {}


def _same_rows(inputs: Arrays, which: list[int]) -> list[int] | None:
    if any(i >= len(inputs) or inputs[i].ndim == 0 for i in which):
        return None
    n = inputs[which[0]].shape[0]
    return which if all(inputs[i].shape[0] == n for i in which) else None


def _elewise_rows(param: dict, inputs: Arrays) -> list[int] | None:
    if not inputs or inputs[0].ndim == 0:
        return None
    full = [i for i, x in enumerate(inputs) if x.ndim == inputs[0].ndim]
    return _same_rows(inputs, full)  # lower-rank inputs broadcast whole


def _along_last(inputs: Arrays, dims: list[int]) -> list[int] | None:
    if not inputs or inputs[0].ndim < 2:
        return None
    n = inputs[0].ndim
    return [0] if all(-n <= d < n and d % n != 0 for d in dims) else None


ROW_INPUTS.update({
    # x's rows (the weight whole): the result and its terms' magnitudes a block at a time
    "LinearOperation": lambda p, ins: None if _flag(p, "transposeA", False) or not ins
    or ins[0].ndim < 2 else _same_rows(ins, [0]),
    "RmsNormOperation": lambda p, ins: _same_rows(ins, [0]),
    "RopeOperation": lambda p, ins: _same_rows(ins, [0, 1, 2, 3])
    if ins and ins[0].ndim == 2 else None,
    "ActivationOperation": lambda p, ins: _along_last(ins, [_int(p, "dim", -1)]),
    "ElewiseOperation": _elewise_rows,
    "SplitOperation": lambda p, ins: _along_last(ins, [_int(p, "splitDim", 0)]),
    "SoftmaxOperation": lambda p, ins: _along_last(ins, _ints(p, "axes", [-1]) or [-1]),
    "GatherOperation": lambda p, ins: _same_rows(ins, [1])
    if _int(p, "axis", 0) == 0 and len(ins) > 1 and ins[1].ndim else None,
})


def _float32_weight(param: dict, inputs: Arrays) -> Arrays:
    return [x.astype(np.float32) if i == 1 and x.dtype == np.float16 else x
            for i, x in enumerate(inputs)]


# What every piece of rows takes whole, converted once per op rather than once per
# piece: a Linear's fp16 weight to float32 (exactly), which its blocks then widen to
# float64 several times faster than numpy widens fp16, and its magnitude uses as is.
PREPARE: dict[str, Callable[[dict, Arrays], Arrays]] = {"LinearOperation": _float32_weight}
