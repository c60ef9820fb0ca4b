"""The result cells named as msProbe's `compare -m atb` columns (Golden/Target
Max, Min, Mean, Norm; Cosine, Max Absolute Err, Max Relative Err), held to its
definitions for tensor pairs, where msProbe computes them from the two tensors:

* Mean: torch's `mean()`, which sums fp16 and bf16 tensors in float32 and
  rounds the result to the tensor's dtype, and takes every other dtype
  (float64, integers) as float32: our exact mean rounded to float32, then to
  fp16/bf16 for those;
* Max, Min, Mean, Norm are N/A (null here) where torch gives NaN: a tensor
  holding a NaN has no Max or Min (torch's propagate it), nor Mean or Norm;
* Cosine, Max Absolute Err and Max Relative Err are N/A where the two tensors
  hold NaN/Inf at different positions (ours also where a +Inf faces a -Inf,
  which msProbe counts as the same position). Where they agree msProbe sets
  them to 0 on both sides, which gives the values ours take over the finite
  elements;
* Cosine is N/A (msProbe: "unsupported") for a tensor of one element: a
  scalar's cosine is only its sign.

Statistics-only pairs keep the dumps' statistics, as msProbe's columns copy its
CSV cells.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bf16 (to nearest, ties to even), as float32."""
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def msprobe_mean(mean: pl.Series, dtype: pl.Series) -> pl.Series:
    """Means as msProbe's compare computes them for tensors of these dtypes (N/A
    for bool; complex ones are left as they are)."""
    names = dtype.fill_null("").to_numpy()
    value = mean.cast(pl.Float64).fill_null(np.nan).to_numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = value.astype(np.float32)
        out = f32.astype(np.float64)
        half, bf = names == "float16", names == "bf16"
        out[half] = f32[half].astype(np.float16)
        out[bf] = _bf16(f32[bf])
    out[names == "bool"] = np.nan
    complex_ = np.char.startswith(names.astype(str), "complex")
    out[complex_] = value[complex_]
    return pl.Series(mean.name, out).fill_nan(None)


def as_msprobe(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` (compare's RESULT_COLUMNS) with the cells above in msProbe's form."""
    tensor = pl.col("mode") == "tensor"
    cells = []
    for s in ("golden", "target"):
        holds_nan = pl.col(f"{s}_nan").fill_null(0) > 0
        cells += [pl.when(tensor & holds_nan).then(None).otherwise(pl.col(f"{s}_{k}"))
                  .alias(f"{s}_{k}") for k in ("max", "min")]
        cells.append(pl.when(tensor & pl.col(f"{s}_norm").is_nan()).then(None)
                     .otherwise(pl.col(f"{s}_norm")).alias(f"{s}_norm"))
        cells.append(pl.when(tensor).then(
            pl.struct(f"{s}_mean", f"{s}_dtype").map_batches(
                lambda m, s=s: msprobe_mean(m.struct.field(f"{s}_mean"),
                                            m.struct.field(f"{s}_dtype")),
                return_dtype=pl.Float64)).otherwise(pl.col(f"{s}_mean")).alias(f"{s}_mean"))
    apart = tensor & (pl.col("nonfinite_match") == False)  # noqa: E712 (null: unknown)
    one_element = tensor & pl.col("target_shape").fill_null("").str.contains(r"^(1(x1)*)?$")
    empty_where = {"cosine": apart | one_element, "max_abs_err": apart, "max_rel_err": apart}
    return rows.with_columns(*cells, *[pl.when(where).then(None).otherwise(pl.col(m)).alias(m)
                                       for m, where in empty_where.items()])
