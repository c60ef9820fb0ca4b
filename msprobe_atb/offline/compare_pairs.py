"""Which golden tensor pairs with which target tensor: compare's matching, done on
row numbers and keys only, so no wide frame goes through a join or a sort.

Each side is cut to its row numbers, process pair, round, key (table.py: op id
path, op name path, stage, io, index) and sequence. The n-th occurrence of a key
in a round pairs with the n-th; leftovers on both sides then pair by op id path,
stage, io and index, and the names without their dtype tags (or any names with
`pair_by_id`). Two dumps of one model and config list the same keys in the same
order: then row i pairs with row i, seen by comparing the key columns, no join.
Otherwise the keys are joined as one 64-bit hash per row (plus the occurrence)
and every pair found is checked against the real keys; a hash collision falls
back to joining on the keys themselves, so the pairs are exact either way.
compare.py then gathers only the columns it needs by these row numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from .compare_scope import name_without_dtype
from .table import in_order

ROW = pl.UInt32
KEY = ["p", "round", "key"]


@dataclass
class RowPairs:
    """One row per result row, in the result's order (target process, target
    sequence, then golden-only rows by golden sequence): `p` (index into the
    process pairs), `round`, `gi` and `ti` (row numbers of the golden and target
    tables, null: no tensor on that side). `aligned`: row i pairs with row i,
    for every row of both tables."""

    frame: pl.DataFrame
    aligned: bool


def occurrence(df: pl.DataFrame, by: list[str], hashed: str) -> pl.Series:
    """The n-th occurrence (0, 1, ...) of each row's `by` values, in row order,
    `hashed` being the hash of `by`. A window over a million mostly unique keys
    costs seconds; most rows' keys are unique (occurrence 0), so only the rows
    whose hash repeats are numbered, with the real keys (a hash collision only
    enlarges that subset)."""
    dup = df.get_column(hashed).is_duplicated()
    occ = pl.zeros(df.height, pl.UInt32, eager=True).alias("_occ")
    if not dup.any():
        return occ
    sub = df.with_row_index("_r").filter(dup).select(
        "_r", pl.int_range(pl.len(), dtype=pl.UInt32).over(by).alias("_occ"))
    return occ.scatter(sub.get_column("_r"), sub.get_column("_occ"))


def _side(df: pl.DataFrame, procs: dict[str, int]) -> pl.DataFrame:
    """Row number `i`, process pair `p`, round, key and seq of the rows of the
    paired processes, in table order."""
    return df.lazy().select(
        pl.int_range(pl.len(), dtype=ROW).alias("i"),
        pl.col("dev_pid").replace_strict(procs, default=None, return_dtype=ROW).alias("p"),
        "round", "key", "seq",
    ).filter(pl.col("p").is_not_null()).collect()


def key_hash(by: list[str]) -> pl.Expr:
    return pl.struct(by).hash()


def _join(gs: pl.DataFrame, ts: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Full join of two sides' rows on `by` and the occurrence: `g` and `t`,
    positions in `gs` and `ts` (null: unpaired)."""
    def keyed(s: pl.DataFrame, pos: str) -> pl.DataFrame:
        # a null key pairs with nothing, as in a join on the keys
        h = pl.when(pl.all_horizontal([pl.col(c).is_not_null() for c in by])).then(
            key_hash(by)).alias("_h")
        s = s.select(*by, h)
        return s.with_columns(occurrence(s, by, "_h"), pl.int_range(pl.len(), dtype=ROW)
                              .alias(pos))

    gk, tk = keyed(gs, "g"), keyed(ts, "t")
    j = gk.lazy().select("_h", "_occ", "g").join(
        tk.lazy().select("_h", "_occ", "t"), on=["_h", "_occ"], how="full",
        coalesce=True).select("g", "t").collect()
    both = j.drop_nulls()
    if all(gs.get_column(c).gather(both.get_column("g")).equals(
            ts.get_column(c).gather(both.get_column("t"))) for c in by):
        return j
    # Two different keys with one hash: join on the keys themselves.
    return gk.join(tk, on=[*by, "_occ"], how="full", coalesce=True).select("g", "t")


def _aligned(gs: pl.DataFrame, ts: pl.DataFrame) -> bool:
    """The same keys in the same rows (a null key pairs with nothing)."""
    return gs.height == ts.height and all(
        gs.get_column(c).equals(ts.get_column(c), null_equal=False) for c in KEY)


def _id_key(df: pl.DataFrame, rows: pl.Series, pair_by_id: bool) -> pl.Series:
    """The second pass's key of table rows `rows`: op id path, stage, io, index,
    and the op names without their dtype tags unless `pair_by_id`."""
    key = (pl.col("op_id") + "|" + pl.col("stage") + "|" + pl.col("io") + "."
           + pl.col("index"))
    if not pair_by_id:
        key = key + "|" + name_without_dtype("op_name")
    return df.select(pl.col("op_id", "op_name", "stage", "io", "index").gather(rows)
                     ).select(key.alias("key")).get_column("key")


def _leftovers(g: pl.DataFrame, t: pl.DataFrame, gs: pl.DataFrame, ts: pl.DataFrame,
               first: pl.DataFrame, pair_by_id: bool) -> pl.DataFrame:
    """The first pass's pairs, with its leftovers paired by the id key."""
    lg = first.filter(pl.col("t").is_null()).get_column("g").sort()
    lt = first.filter(pl.col("g").is_null()).get_column("t").sort()
    if lg.is_empty() or lt.is_empty():
        return first
    sides = [s[pos].with_columns(_id_key(tab, s.get_column("i").gather(pos), pair_by_id))
             for tab, s, pos in ((g, gs, lg), (t, ts, lt))]
    second = _join(*sides, KEY)
    second = pl.DataFrame({"g": lg.gather(second.get_column("g")),
                           "t": lt.gather(second.get_column("t"))})
    return pl.concat([first.drop_nulls(), second])


def pair_rows(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
              pair_by_id: bool) -> RowPairs:
    """The row pairs of the golden and target tables `g` and `t` (table.py) for
    the process pairs `pairs`."""
    gs = _side(g, {a: i for i, (a, _) in enumerate(pairs)})
    ts = _side(t, {b: i for i, (_, b) in enumerate(pairs)})
    aligned = _aligned(gs, ts)
    if aligned:  # nothing to gather
        rows = gs.select("p", "round", pl.col("i").alias("gi"), pl.col("i").alias("ti"),
                         ts.get_column("seq").alias("_tseq"), pl.col("seq").alias("_gseq"))
    else:
        pos = _leftovers(g, t, gs, ts, _join(gs, ts, KEY), pair_by_id)

        def at(s: pl.DataFrame, c: str) -> pl.Series:
            return s.get_column(c).gather(pos.get_column("g" if s is gs else "t"))

        rows = pl.DataFrame({
            "_gp": at(gs, "p"), "_tp": at(ts, "p"), "_gr": at(gs, "round"),
            "_tr": at(ts, "round"), "gi": at(gs, "i"), "ti": at(ts, "i"),
            "_tseq": at(ts, "seq"), "_gseq": at(gs, "seq"),
        }).select(pl.coalesce("_gp", "_tp").alias("p"), pl.coalesce("_gr", "_tr").alias("round"),
                  "gi", "ti", "_tseq", "_gseq")
    # by target process name, as the result lists them
    ranks = [0] * len(pairs)
    for r, i in enumerate(sorted(range(len(pairs)), key=lambda i: pairs[i][1])):
        ranks[i] = r
    rank = pl.Series(ranks, dtype=ROW)
    order = [pl.lit(rank).gather(pl.col("p")), pl.col("_tseq").is_null(), pl.col("_tseq"),
             pl.col("_gseq")]
    if not in_order(rows, order):
        rows = rows.sort(order, maintain_order=True)
        aligned = False
    return RowPairs(rows.drop("_tseq", "_gseq"), aligned and gs.height == g.height
                    and ts.height == t.height)
