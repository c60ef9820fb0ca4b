"""The range of a tensor's counts: NaN, +Inf, -Inf and zero elements are each
between 0 and its element count, and that count is not negative. A row outside
it is crafted or corrupted data (the probe never writes one): summing such
counts would make the readers report fewer NaN/Inf tensors than the dump holds,
so a reader refuses the row by name instead of using it."""

from __future__ import annotations

import polars as pl

PART_COUNTS = ("nan", "pinf", "ninf", "zero")  # each at most `count`


def count_problem() -> pl.Expr:
    """Per row, what is out of range in its counts (a phrase naming the column and
    its value), or null when they are sound. Unknown (null) counts are sound."""
    count = pl.col("count")
    checks = [pl.when(count < 0).then(pl.format("'count' {} is negative", count))]
    for c in PART_COUNTS:
        v = pl.col(c)
        checks.append(pl.when(v < 0).then(pl.format(f"'{c}' count {{}} is negative", v)))
        checks.append(pl.when(v > count).then(
            pl.format(f"'{c}' count {{}} is more than the tensor's {{}} elements", v, count)))
    return pl.coalesce(checks)


def drop_miscounted(df: pl.DataFrame | None, problems: list[str]) -> pl.DataFrame | None:
    """The tensor table `df` (rows from statistic_extra.csv) with the counts of a row
    out of range cleared (unknown, as in a CSV without them) and the reason in its
    note; named per round dir in problems."""
    if df is None:
        return None
    out = df.with_columns(count_problem().alias("_why"))
    bad = out.filter(pl.col("_why").is_not_null())
    if not bad.height:
        return df
    for (rd,), rows in bad.group_by("round_dir", maintain_order=True):
        problems.append(f"{rd}: the counts of {rows.height} row(s) refused: "
                        f"{rows.get_column('_why')[0]} (e.g. op {rows.get_column('op_id')[0]}); "
                        "they are taken as unknown")
    why = pl.col("_why").is_not_null()
    return out.with_columns(
        *[pl.when(why).then(None).otherwise(pl.col(c)).alias(c) for c in ("count", *PART_COUNTS)],
        pl.when(why).then(pl.lit("counts refused: ") + pl.col("_why"))
        .otherwise(pl.col("note")).alias("note")).drop("_why")
