"""Per-tensor comparison metrics, golden vs target, streamed in one fused pass.

Definitions (n = number of elements; g = golden, t = target, both as float64):
* cosine = g·t / (‖g‖‖t‖) over elements finite on both sides; 1 if both are all
  zero, 0 if only one is;
* max_abs_err = max |t − g|; rmse = sqrt(mean((t − g)²)); rel_rmse = rmse / rms(g);
* max_rel_err = max |(t − g) / g|, msProbe's Max Relative Err: where g = 0, both g
  and t are raised by the machine epsilon ε first (so such an element gives
  |t| / ε); computed in float32 (ε = 2⁻²³) when both tensors are floats of 32 bits
  or fewer (or complex of them), else in float64 (ε = 2⁻⁵²), as numpy's result
  type makes msProbe do;
* max_rel_err_atol = max |t − g| / max(|g|, atol): the atol floor keeps values
  near zero from blowing the relative error up;
* within_tol = share of elements with |t − g| ≤ atol + rtol·|g|, where (rtol, atol)
  come from the TARGET's dtype (dtypes.TOLERANCES: fp16 1e-3, bf16 8e-3, fp32 1e-5,
  integers exact). A NaN or ±Inf element counts as within only if the other side
  has the same non-finite value at the same position;
* nonfinite_match: NaN and ±Inf positions (and signs) agree on both sides.
The finite metrics (cosine, errors) are over positions finite on both sides; a
pair with none, whose NaN/Inf all agree, has cosine 1 and errors 0 (as if all zero,
as msProbe sets them).
Complex tensors compare as their interleaved (re, im) float pairs.

How: a pair is read in chunks of CHUNK elements from each payload's offset into
reused buffers, so memory stays fixed whatever the tensor size, and each chunk
updates every accumulator at once in the native kernel
(native/compare/pair_kernel.c). fp16, bf16, fp32 and fp64 payloads (and the
complex types built from them) go to the kernel as they are; the other dtypes
are decoded chunk by chunk, to float32 for the narrow floats, to float64 first
for the rest. Every element is converted to
float64 exactly and every per-element formula rounds as numpy's does, so counts,
maxima and within_tol equal the former whole-array numpy code bit for bit; the
sums (norms, dot, squared error) differ from numpy's summation order by a few
units in the last place. Accumulators of separate element ranges merge, so a
pair can also be computed in pieces on different machines (compare/pair_engine.py).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from msprobe_atb.tree.datafile import open_data
from msprobe_atb.tree.names import os_path

from ..read.binfile import BinFileError, BinHeader, TensorNotSaved, payload_spec, resolve
from ..read.dtypes import SPECS, tolerance
from ._pair_kernel import ffi, lib

CHUNK = 1 << 20  # tensor elements per read; a multiple of every packing group

# dtype code -> (kernel element type, kernel elements per tensor element)
KERNEL_TYPES = {0: (lib.PK_F32, 1), 1: (lib.PK_F16, 1), 11: (lib.PK_F64, 1),
                27: (lib.PK_BF16, 1), 16: (lib.PK_F32, 2), 17: (lib.PK_F64, 2),
                33: (lib.PK_F16, 2)}
KERNEL_ITEM = {lib.PK_F64: 8, lib.PK_F32: 4, lib.PK_F16: 2, lib.PK_BF16: 2}
# Packed dtypes: (elements, bytes) of the smallest piece a chunk may start at.
PACKED = {29: (2, 1), 40: (2, 1), 41: (2, 1), 30: (8, 1), 38: (4, 3), 39: (4, 3)}
ACC_FIELDS = ("n", "both", "ok", "same_nf", "nf_diff", "g_nan", "g_pinf", "g_ninf", "t_nan",
              "t_pinf", "t_ninf", "gg", "tt", "gt", "dd", "gg_c", "tt_c", "gt_c", "dd_c",
              "max_d", "max_rel", "max_rel_ms")


@dataclass(frozen=True)
class TensorFile:
    """A resolved, size-checked tensor file and how to stream it."""

    hdr: BinHeader
    numel: int  # tensor elements (string: bytes)
    shape: tuple[int, ...]
    group: tuple[int, int]  # (elements, bytes) of the smallest aligned piece

    @property
    def kernel(self) -> tuple[int, int] | None:
        """(kernel type, stream elements per tensor element), None: decode to float64."""
        return KERNEL_TYPES.get(self.hdr.dtype)

    @property
    def stream_len(self) -> int:
        k = self.kernel
        return self.numel * (k[1] if k else 1)

    def byte_span(self, start: int, stop: int) -> tuple[int, int]:
        """(file offset, bytes) of tensor elements [start, stop); start is chunk aligned."""
        ge, gb = self.group
        first = start // ge * gb
        last = self.hdr.length if stop >= self.numel else stop // ge * gb
        return self.hdr.data_offset + first, last - first


def open_tensor(path: str) -> TensorFile:
    """Resolve aliases and check the payload; raises TensorNotSaved / BinFileError.
    `path` is a table's (names.py's text form)."""
    return tensor_file(resolve(os_path(path)))


def tensor_file(hdr: BinHeader) -> TensorFile:
    """A resolved header's TensorFile, its payload checked (BinFileError)."""
    payload_spec(hdr)
    if hdr.dtype == 13:  # string: the raw bytes are the elements
        return TensorFile(hdr, hdr.length, (hdr.length,), (1, 1))
    numel = hdr.numel
    group = PACKED.get(hdr.dtype)
    if group == (4, 3) and hdr.length == numel:  # fp6 stored one element per byte
        group = (1, 1)
    if group is None:
        group = (1, hdr.length // numel if numel else 1)
    return TensorFile(hdr, numel, hdr.dims, group)


def chunks(numel: int, chunk: int | None = None) -> list[tuple[int, int]]:
    """Element ranges covering [0, numel). The last range is never shorter than a
    chunk (it absorbs the tail), so a packed decoder always sees a full piece."""
    chunk = chunk or CHUNK
    out, start = [], 0
    while numel - start >= 2 * chunk:
        out.append((start, start + chunk))
        start += chunk
    if start < numel or not out:
        out.append((start, numel))
    return out


class Reader:
    """Reads element ranges of one tensor file into a buffer reused across calls."""

    def __init__(self) -> None:
        self._buf = np.empty(0, dtype=np.uint8)

    def read(self, tf: TensorFile, fh, start: int, stop: int) -> np.ndarray:
        off, size = tf.byte_span(start, stop)
        if self._buf.size < size:
            self._buf = np.empty(size, dtype=np.uint8)
        view = memoryview(self._buf)[:size]
        fh.seek(off)
        got = 0
        while got < size:
            n = fh.readinto(view[got:])
            if not n:
                raise BinFileError(tf.hdr.path, f"file shrank while being read: {got} of "
                                                f"{size} payload bytes at offset {off}")
            got += n
        return self._buf[:size]


def stream_array(tf: TensorFile, raw: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, int]:
    """The kernel's view of raw payload bytes of elements [start, stop): (array, type)."""
    k = tf.kernel
    if k is not None:
        return raw, k[0]
    a = SPECS[tf.hdr.dtype].decode(raw, stop - start, False)
    if a.dtype == np.float32:  # bf16/fp8/fp6/fp4 values: max_rel_err's float32 arithmetic
        return np.ascontiguousarray(a), lib.PK_F32
    return np.ascontiguousarray(a, dtype=np.float64), lib.PK_F64


class Accumulator:
    """The kernel's running sums over the elements seen so far of one pair."""

    def __init__(self, state: tuple | None = None) -> None:
        self._acc = ffi.new("pk_acc *")
        if state is not None:
            for name, v in zip(ACC_FIELDS, state):
                setattr(self._acc, name, v)

    def add(self, g: np.ndarray, gtype: int, t: np.ndarray, ttype: int, count: int,
            rtol: float, atol: float) -> None:
        lib.pk_accumulate(self._acc, ffi.from_buffer(g), gtype, ffi.from_buffer(t), ttype,
                          count, rtol, atol, atol or 1e-30)

    def merge(self, other: Accumulator) -> None:
        lib.pk_merge(self._acc, other._acc)

    def state(self) -> tuple:
        """Plain numbers, to send between processes."""
        return tuple(getattr(self._acc, f) for f in ACC_FIELDS)

    def metrics(self, rtol: float, atol: float) -> dict:
        a = self._acc
        out: dict = {"rtol": rtol, "atol": atol, "golden_nan": a.g_nan,
                     "golden_pinf": a.g_pinf, "golden_ninf": a.g_ninf, "target_nan": a.t_nan,
                     "target_pinf": a.t_pinf, "target_ninf": a.t_ninf,
                     "nonfinite_match": a.nf_diff == 0,
                     "within_tol": float((a.ok + a.same_nf) / a.n) if a.n else 1.0}
        if a.both:
            ng, nt = math.sqrt(a.gg + a.gg_c), math.sqrt(a.tt + a.tt_c)
            if ng == 0 and nt == 0:
                cos = 1.0
            elif ng == 0 or nt == 0:
                cos = 0.0
            else:
                cos = (a.gt + a.gt_c) / (ng * nt)
            rmse = math.sqrt((a.dd + a.dd_c) / a.both)
            rms_g = ng / math.sqrt(a.both)
            out.update(cosine=cos, max_abs_err=a.max_d, rmse=rmse, max_rel_err=a.max_rel_ms,
                       max_rel_err_atol=a.max_rel,
                       rel_rmse=rmse / rms_g if rms_g > 0 else (0.0 if rmse == 0 else math.inf))
        elif a.n and a.nf_diff == 0:  # all NaN/Inf, the same on both sides: as all zero
            out.update(cosine=1.0, max_abs_err=0.0, max_rel_err=0.0, max_rel_err_atol=0.0)
        return out


def max_rel_err64(golden: np.ndarray, target: np.ndarray) -> float:
    """max_rel_err of finite float64 arrays as the kernel computes it for a float64
    side, for callers that judge elements in numpy (replay)."""
    zero = golden == 0
    eps = np.finfo(np.float64).eps
    g, t = np.where(zero, eps, golden), np.where(zero, target + eps, target)
    return float(np.abs((t - g) / g).max()) if g.size else 0.0


def mismatch(g: TensorFile, t: TensorFile) -> str | None:
    """Why two tensors cannot be compared element-wise, or None."""
    if g.shape != t.shape:
        return f"shape differs: golden {g.shape} vs target {t.shape}"
    if g.stream_len != t.stream_len:
        return (f"golden {g.hdr.dtype_name} vs target {t.hdr.dtype_name}: a complex tensor "
                "compares only with a complex one")
    return None


def pieces(g: TensorFile, t: TensorFile, gfh, tfh, readers: tuple[Reader, Reader],
           ranges: Iterable[tuple[int, int]]) -> Iterator[tuple]:
    """(golden array, type, target array, type, stream count) per element range."""
    per = g.stream_len // max(g.numel, 1)  # complex: 2
    for a, b in ranges:
        ga, gk = stream_array(g, readers[0].read(g, gfh, a, b), a, b)
        ta, tk = stream_array(t, readers[1].read(t, tfh, a, b), a, b)
        yield ga, gk, ta, tk, (b - a) * per


_LOCAL = threading.local()  # each thread its own pair of buffers


def _readers() -> tuple[Reader, Reader]:
    if not hasattr(_LOCAL, "readers"):
        _LOCAL.readers = (Reader(), Reader())
    return _LOCAL.readers


def pair_accumulate(g: TensorFile, t: TensorFile, rtol: float, atol: float) -> Accumulator:
    """Accumulator of a comparable pair, both files local."""
    total = Accumulator()
    with open_data(g.hdr.path, buffering=0) as gfh, open_data(t.hdr.path, buffering=0) as tfh:
        for piece in pieces(g, t, gfh, tfh, _readers(), chunks(g.numel)):
            total.merge(chunk_accumulator(piece, rtol, atol))
    return total


def chunk_accumulator(piece: tuple, rtol: float, atol: float) -> Accumulator:
    """One chunk's accumulator. A pair's total is the merge of its chunks' in
    order, wherever each was computed, so every path gives the same bits."""
    acc = Accumulator()
    acc.add(*piece, rtol, atol)
    return acc


def resolve_tolerance(target_dtype: str, rtol: float | None,
                      atol: float | None) -> tuple[float, float]:
    drt, dat = tolerance(target_dtype)
    return (drt if rtol is None else rtol), (dat if atol is None else atol)


def file_metrics(golden: str, target: str, target_dtype: str,
                 rtol: float | None, atol: float | None) -> dict:
    """Metrics of one pair of `.bin` files (aliases followed); errors become a reason."""
    rtol, atol = resolve_tolerance(target_dtype, rtol, atol)
    try:
        g = open_tensor(golden)
        t = open_tensor(target)
        why = mismatch(g, t)
        if why:
            return {"state": "ok", "rtol": rtol, "atol": atol, "reason": why}
        acc = pair_accumulate(g, t, rtol, atol)
    except TensorNotSaved as e:
        return {"state": "not-saved", "reason": str(e), "rtol": rtol, "atol": atol}
    except BinFileError as e:
        return {"state": "unreadable", "reason": str(e), "rtol": rtol, "atol": atol}
    return {"state": "ok", **acc.metrics(rtol, atol)}
