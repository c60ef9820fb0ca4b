"""The golden of each ATB tensor built from the torch tensors its alignment names
(torch_align.Source): concatenated on the last axis, cut to columns and to the rows
ATB selected (lm_head_indices), reshaped to the ATB shape, written as a `.bin`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from ..read.binfile import BinFileError, load_bin
from ..read.binwrite import bin_header
from ..read.dtypes import DTYPE_CODES
from .torch_align import Source


def _flat(a: np.ndarray) -> np.ndarray:
    """[..., last] as [tokens, last] (a 0-d or 1-d tensor as one row)."""
    return a.reshape(-1, a.shape[-1]) if a.ndim >= 1 and a.size else a.reshape(1, -1)


class Builder:
    """Builds and writes the golden of each aligned ATB tensor."""

    def __init__(self, torch: pl.DataFrame, target: pl.DataFrame, work: Path):
        self.work = work
        self.files = {(d, c, m, io, i): (p, s) for d, c, m, io, i, p, s in torch.select(
            "dev_pid", "call", "module", "io", "index", "path", "shape").iter_rows()}
        self.target = target
        self._rows_cache: dict[tuple[str, int, str | None], np.ndarray | None] = {}
        self.written = 0

    def paths(self, tp: str, call: int, src: Source) -> list[str | None]:
        return [(self.files.get((tp, call, r.module, r.io, r.index)) or (None,))[0]
                for r in src.refs]

    def _selected_rows(self, ap: str, rnd: int, model: str | None) -> np.ndarray | None:
        """ATB's lm_head_indices in this execution: input 1 of its LM head's Gather."""
        key = (ap, rnd, model)
        if key not in self._rows_cache:
            t = self.target
            hit = t.filter((pl.col("dev_pid") == ap) & (pl.col("round") == rnd)
                           & (pl.col("model").is_null() if model is None else
                              pl.col("model") == model)
                           & pl.col("op_type").str.contains("(?i)gather")
                           & (pl.col("io") == "input") & pl.col("index").str.starts_with("1")
                           & pl.col("primary")).sort("seq", descending=True)
            arr = None
            for p in hit.get_column("path").drop_nulls().to_list():
                try:
                    arr = load_bin(p).reshape(-1).astype(np.int64)
                    break
                except (BinFileError, ValueError):
                    continue
            self._rows_cache[key] = arr
        return self._rows_cache[key]

    def build(self, tp: str, call: int, src: Source, target_shape: str, ap: str, rnd: int,
              model: str | None, name: str
              ) -> tuple[Path | None, np.ndarray | None, str, str]:
        """Writes the golden of one ATB tensor; returns (file, its values, transform
        text, problem)."""
        paths = self.paths(tp, call, src)
        missing = [r.text() for r in src.refs if (tp, call, r.module, r.io, r.index)
                   not in self.files]
        if missing:
            return None, None, "", f"the torch dump has no {', '.join(missing)}"
        if None in paths:
            return None, None, "", ("the torch dump has statistics only (task statistics): "
                                    "aligning needs its tensors (task tensor or all)")
        try:
            raw = [load_bin(p) for p in paths]
        except BinFileError as e:
            return None, None, "", f"torch tensor unreadable: {e}"
        parts = [_flat(x) for x in raw]
        # the torch-layout shape of the golden: one tensor's, or the concatenation's
        shape = raw[0].shape[:-1] + (sum(x.shape[-1] for x in raw),) if raw[0].ndim else ()
        steps = []
        if len(parts) > 1:
            if len({p.shape[0] for p in parts}) != 1:
                return None, None, "", ("the concatenated torch tensors have different "
                                        "token counts")
            a = np.concatenate(parts, axis=-1)
            steps.append("concat on the last axis")
        else:
            a = parts[0]
        if src.cols:
            lo, hi = src.cols
            if hi > a.shape[-1]:
                return None, None, "", (f"columns {lo}:{hi} are beyond the torch tensor's "
                                        f"{a.shape[-1]}")
            a = a[:, lo:hi]
            shape = tuple(shape[:-1]) + (hi - lo,)
            steps.append(f"columns {lo}:{hi}")
        dims = tuple(int(d) for d in target_shape.split("x")) if target_shape else ()
        want_rows = int(np.prod(dims[:-1])) if len(dims) > 1 else 1
        if src.rows and a.shape[0] > want_rows:
            sel = self._selected_rows(ap, rnd, model)
            if sel is not None and sel.size == want_rows and sel.min() >= 0 and \
                    sel.max() < a.shape[0]:
                a = a[sel]
                steps.append(f"rows {sel.tolist()[:8]} (lm_head_indices)")
            else:
                a = a[-want_rows:]
                steps.append(f"last {want_rows} row(s)")
            shape = a.shape
        if a.size == int(np.prod(dims)):
            a = a.reshape(dims)
        if tuple(shape) != a.shape:
            steps.append(f"reshape {'x'.join(map(str, shape))} -> "
                         f"{'x'.join(map(str, a.shape))}")
        self.written += 1
        f = self.work / f"{self.written:07d}_{name}.bin"
        return f, _write(f, np.ascontiguousarray(a)), "; ".join(steps), ""


# numpy dtype -> the dump's dtype name (dtypes.DTYPE_NAMES); anything else is written
# as float32
NUMPY_DTYPES = {"float32": "float", "float16": "float16", "float64": "double",
                "int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8",
                "bool": "bool"}


def _write(path: Path, a: np.ndarray) -> np.ndarray:
    """Writes `a` as a `.bin`; returns what was written."""
    if a.dtype.name not in NUMPY_DTYPES:
        a = a.astype(np.float32)
    with open(path, "wb") as fh:
        fh.write(bin_header(a.nbytes, DTYPE_CODES[NUMPY_DTYPES[a.dtype.name]], a.shape))
        fh.write(a.tobytes())
    return a
