"""Which golden tensor pairs with which target tensor: compare's matching, done on
row numbers and keys only, so no wide frame goes through a join or a sort.

Each side is cut to its row numbers, process pair, round, key (read/table.py: op id
path, op name path, stage, io, index) and sequence. The n-th occurrence of a key
in a round pairs with the n-th; leftovers on both sides then pair by op id path,
stage, io and index, and the names without their dtype tags (or any names with
`pair_by_id`). Two dumps of one model and config list the same keys in the same
order: then row i pairs with row i, seen by comparing the key columns, no join.
Otherwise the keys are joined as one 64-bit hash per row (plus the occurrence)
and every pair found is checked against the real keys; a hash collision falls
back to joining on the keys themselves, so the pairs are exact either way.
dumps.py then takes only the columns it needs by these row numbers (`take`:
slices where the rows run in order, as they mostly do, not a gather).
"""

from __future__ import annotations

import polars as pl

from ..read.table import in_order
from .scope import name_without_dtype

ROW = pl.UInt32
KEY = ["p", "round", "key"]
MAX_SLICES = 1000  # more runs of consecutive rows than this: one gather instead


def take(df: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    """The rows `rows` of `df` (null: a row of nulls). Where the row numbers run
    consecutively, as slices (no copy): a gather of a million rows of strings
    costs a quarter of a second."""
    runs = (rows.cast(pl.Int64) - pl.int_range(rows.len(), dtype=pl.Int64, eager=True)).rle()
    if runs.len() > MAX_SLICES:
        return df[rows]
    pieces, at = [], 0
    for n, off in runs.struct.unnest().iter_rows():
        pieces.append(df.clear(n) if off is None else df.slice(at + off, n))
        at += n
    return pl.concat(pieces, rechunk=False) if pieces else df.clear()


def key_hash(by: list[str]) -> pl.Expr:
    """One 64-bit hash of the `by` columns (a seed per column, so swapped values
    of two columns do not collide)."""
    h = pl.col(by[0]).hash(seed=0)
    for i, c in enumerate(by[1:], 1):
        h = h.xor(pl.col(c).hash(seed=i))
    return h


def occurrence(df: pl.DataFrame, by: list[str], hashed: str) -> pl.Series:
    """The n-th occurrence (0, 1, ...) of each row's `by` values, in row order,
    `hashed` being the hash of `by`. A window over a million mostly unique keys
    costs seconds; most rows' keys are unique (occurrence 0), so only the rows
    whose hash repeats are numbered, with the real keys (a hash collision only
    enlarges that subset)."""
    occ = pl.zeros(df.height, pl.UInt32, eager=True).alias("_occ")
    h = df.get_column(hashed)
    if h.n_unique() == h.len():  # a quarter of the cost of is_duplicated
        return occ
    dup = h.is_duplicated()
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


def _join(gs: pl.DataFrame, ts: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Full join of two sides' rows on `by` and the occurrence: `g` and `t`,
    positions in `gs` and `ts` (null: unpaired)."""
    def keyed(s: pl.DataFrame, pos: str) -> pl.DataFrame:
        h = key_hash(by)
        nulls = [pl.col(c).is_null() for c in by if s.get_column(c).null_count()]
        if nulls:  # a null key pairs with nothing, as in a join on the keys
            h = pl.when(~pl.any_horizontal(nulls)).then(h)
        s = s.select(*by, h.alias("_h"))
        return s.with_columns(occurrence(s, by, "_h"), pl.int_range(pl.len(), dtype=ROW)
                              .alias(pos))

    gk, tk = keyed(gs, "g"), keyed(ts, "t")
    j = gk.lazy().select("_h", "_occ", "g").join(
        tk.lazy().select("_h", "_occ", "t"), on=["_h", "_occ"], how="full",
        coalesce=True).select("g", "t").collect()
    both = j.drop_nulls()
    if take(gs.select(by), both.get_column("g")).equals(
            take(ts.select(by), both.get_column("t"))):
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
    return take(df.select("op_id", "op_name", "stage", "io", "index"), rows).select(
        key.alias("key")).get_column("key")


def _leftovers(g: pl.DataFrame, t: pl.DataFrame, gs: pl.DataFrame, ts: pl.DataFrame,
               first: pl.DataFrame, pair_by_id: bool) -> pl.DataFrame:
    """The first pass's pairs, with its leftovers paired by the id key."""
    lg = first.filter(pl.col("t").is_null()).get_column("g").sort()
    lt = first.filter(pl.col("g").is_null()).get_column("t").sort()
    if lg.is_empty() or lt.is_empty():
        return first
    sides = [sub.with_columns(_id_key(tab, sub.get_column("i"), pair_by_id))
             for tab, sub in ((g, take(gs, lg)), (t, take(ts, lt)))]
    second = _join(*sides, KEY)
    second = pl.DataFrame({"g": lg.gather(second.get_column("g")),
                           "t": lt.gather(second.get_column("t"))})
    return pl.concat([first.drop_nulls(), second])


def pair_rows(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
              pair_by_id: bool) -> pl.DataFrame:
    """The row pairs of the golden and target tables `g` and `t` (read/table.py) for
    the process pairs `pairs`, one row per result row in the result's order
    (target process, target sequence, then golden-only rows by golden sequence):
    `p` (index into `pairs`), `round`, `gi` and `ti` (row numbers in `g` and
    `t`, null: no tensor on that side)."""
    gs = _side(g, {a: i for i, (a, _) in enumerate(pairs)})
    ts = _side(t, {b: i for i, (_, b) in enumerate(pairs)})
    if _aligned(gs, ts):
        rows = gs.select("p", "round", pl.col("i").alias("gi"), pl.col("i").alias("ti"),
                         ts.get_column("seq").alias("_tseq"), pl.col("seq").alias("_gseq"))
    else:
        pos = _leftovers(g, t, gs, ts, _join(gs, ts, KEY), pair_by_id)
        gp = take(gs.select("p", "round", "i", "seq"), pos.get_column("g"))
        tp = take(ts.select("p", "round", "i", "seq"), pos.get_column("t"))
        rows = pl.concat([gp, tp.rename(lambda c: f"t_{c}")], how="horizontal").select(
            pl.coalesce("p", "t_p").alias("p"), pl.coalesce("round", "t_round").alias("round"),
            pl.col("i").alias("gi"), pl.col("t_i").alias("ti"), pl.col("t_seq").alias("_tseq"),
            pl.col("seq").alias("_gseq"))
    # by target process name, as the result lists them
    ranks = [0] * len(pairs)
    for r, i in enumerate(sorted(range(len(pairs)), key=lambda i: pairs[i][1])):
        ranks[i] = r
    order = [pl.lit(pl.Series(ranks, dtype=ROW)).gather(pl.col("p")),
             pl.col("_tseq").is_null(), pl.col("_tseq"), pl.col("_gseq")]
    if not in_order(rows, order):
        rows = rows.sort(order, maintain_order=True)
    return rows.drop("_tseq", "_gseq")
