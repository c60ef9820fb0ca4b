"""What a compare checked, so it never reports a pass it did not check.

* Structure: the op names of the two dumps at the same op ids (names compared
  without their dtype tags, so `AddF16Kernel` is `AddF32Kernel`), and the number
  of top-level ops of each name (layers): from the model topologies
  (info/model), which list every op whatever the dump selected, else from the
  dumped ops when their names differ. A difference means different models:
  compare says so first, and pairs tensors across different names only when
  asked (`pair_by_id`).
* Coverage: the inputs before and outputs after each op (the `primary` tensors)
  present on each side, and how many of them were checked (pass, fail or
  unreadable). Nothing checked, or fewer than `min_matched` of the smaller
  side, is not a pass: `incomplete`, with the likely causes named. Pairs the
  engine could not compare (a Dask worker died, or none can read the files)
  did line up: they are not counted against the dumps but named, with what the
  cluster could not do (compare then exits 1, as for an unreadable tensor).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from msprobe_atb.tree.graph import load_model_graphs

# A dtype tag inside an op or kernel name: F16, BF16, FP32, I64, Int8, 16, ...
DTYPE_TAG = r"(?i)(?:bf|fp|f|u?int|i|float|half)?\d+"
MIN_MATCHED = 0.5
EXAMPLES = 3


def name_without_dtype(col: str) -> pl.Expr:
    return pl.col(col).str.replace_all(DTYPE_TAG, "")


@dataclass
class Scope:
    golden: int = 0  # primary tensors present (not deliberately unsaved)
    target: int = 0
    checked: int = 0  # primary tensors compared (pass, fail, unreadable)
    min_matched: float = MIN_MATCHED
    structure: list[str] = field(default_factory=list)  # differences, said first
    paired_by_id: bool = False  # the user asked to pair across different names
    causes: list[str] = field(default_factory=list)  # why so little was checked
    lost_why: dict[str, int] = field(default_factory=dict)  # why pairs were not compared
    not_compared: int = 0  # primary tensors paired but not compared (the cluster failed)
    losses: list[str] = field(default_factory=list)  # what either dump lost (lines)
    notes: list[str] = field(default_factory=list)  # what the reader should know

    @property
    def low(self) -> bool:
        """Too few tensors paired (compared, or paired but not compared)."""
        paired = self.checked + self.not_compared
        return paired == 0 or paired < self.min_matched * min(self.golden, self.target)

    @property
    def incomplete(self) -> bool:
        return self.low or (bool(self.structure) and not self.paired_by_id)


def _ids(ids) -> str:
    """['0', '1', '2', '3', '7'] -> '0-3, 7' (top-level ids or rounds, numerically)."""
    runs: list[list[int]] = []
    for n in sorted({int(i) for i in ids if str(i).isdigit()}):
        if runs and runs[-1][1] + 1 == n:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in runs) or "none"


def _ops(df: pl.DataFrame, dev_pid: str) -> pl.DataFrame:
    """The distinct ops of a process (projected before filtering: no wide copy)."""
    return df.lazy().select("dev_pid", "op_id", "op_name").filter(
        pl.col("dev_pid") == dev_pid).select("op_id", "op_name").unique().with_columns(
        name_without_dtype("op_name").alias("_norm")).collect()


def _layer_counts(ops: pl.DataFrame) -> Counter:
    """Top-level ops per name, the names in op id order."""
    top = ops.filter(~pl.col("op_id").str.contains("_")).sort(
        pl.col("op_id").cast(pl.Int64, strict=False))
    return Counter(top.get_column("op_name").to_list())


def model_layers(info: Path | None, dev_pid: str) -> dict[str, Counter]:
    """Model name -> its top-level ops per name (`Prefill_layer_3` counts as
    Prefill_layer), from info/model."""
    out: dict[str, Counter] = {}
    graphs = load_model_graphs(info, dev_pid)
    for _, (nodes, _) in sorted(graphs.items(), key=lambda kv: int(kv[0])):
        if nodes:
            out.setdefault(nodes[0].model, Counter(re.sub(r"_\d+$", "", n.name)
                                                   for n in nodes))
    return out


def _counts_text(gc: Counter, tc: Counter) -> str:
    names = [n for n in dict.fromkeys([*gc, *tc]) if gc[n] != tc[n]]
    return ("golden " + ", ".join(f"{gc[n]} {n}" for n in names) + "; target "
            + ", ".join(f"{tc[n]} {n}" for n in names))


def structure_differences(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
                          ginfo: Path | None = None, tinfo: Path | None = None) -> list[str]:
    """Differences in structure between paired processes, one sentence each."""
    out: list[str] = []
    for gp, tp in pairs:
        go, to = _ops(g, gp), _ops(t, tp)
        both = go.join(to, on="op_id", suffix="_t")
        differ = (both.filter(pl.col("_norm") != pl.col("_norm_t"))
                  .with_columns(pl.col("op_id").str.count_matches("_").alias("_depth"),
                                pl.col("op_id").str.split("_")
                                .list.eval(pl.element().str.zfill(9)).list.join("_")
                                .alias("_num"))
                  .sort(["_depth", "_num"]))
        where = f" ({gp} vs {tp})" if len(pairs) > 1 else ""
        if differ.height:
            ex = "; ".join(f"{r['op_id']}: golden {r['op_name']}, target {r['op_name_t']}"
                           for r in differ.head(EXAMPLES).iter_rows(named=True))
            out.append(f"op names differ at {differ.height} of {both.height} shared op ids"
                       f"{where}, e.g. {ex}")
        gm, tm = model_layers(ginfo, gp), model_layers(tinfo, tp)
        models = [m for m in gm if m in tm and gm[m] != tm[m]]
        for m in models:
            out.append(f"model {m} differs{where} (info/model): {_counts_text(gm[m], tm[m])}")
        gc, tc = _layer_counts(go), _layer_counts(to)
        if differ.height and gc != tc and not models:
            out.append(f"top-level op counts differ{where}: {_counts_text(gc, tc)}")
    return out


def coverage(rows: pl.DataFrame) -> tuple[int, int, int]:
    """(golden present, target present, checked) primary tensors of a result."""
    prim = rows.filter(pl.col("primary").fill_null(False))
    v = pl.col("verdict")
    g = prim.filter(~v.is_in(["target-only", "not-saved"])).height
    t = prim.filter(~v.is_in(["golden-only", "not-saved"])).height
    return g, t, prim.filter(v.is_in(["pass", "fail", "unreadable"])).height


def likely_causes(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
                  rows: pl.DataFrame, structure: list[str]) -> list[str]:
    """Why little or nothing was checked, most likely first."""
    causes: list[str] = []
    for side, df in (("golden", g), ("target", t)):
        if df.height == 0:
            causes.append(f"the {side} dump holds no tensors (no statistic.csv rows and no "
                          ".bin files): wrong directory, or a dump that selected nothing")
    if causes:
        return causes
    if structure:
        causes.append("different models: " + structure[0])
    gp = g.filter(pl.col("dev_pid").is_in([a for a, _ in pairs]))
    tp = t.filter(pl.col("dev_pid").is_in([b for _, b in pairs]))
    gr, tr = set(gp.get_column("round").to_list()), set(tp.get_column("round").to_list())
    if not gr & tr:
        causes.append(f"no round in common (golden rounds {_ids(gr)}, target {_ids(tr)}): "
                      "wrong directories, or give two round "
                      "dirs (…/data/{dev}_{pid}/{round}) to compare one round with another")
    gfiles, tfiles = gp.get_column("path").null_count() < gp.height, \
        tp.get_column("path").null_count() < tp.height
    gstats = gp.get_column("max").null_count() < gp.height or gp.get_column("nan").null_count() \
        < gp.height
    tstats = tp.get_column("max").null_count() < tp.height or tp.get_column("nan").null_count() \
        < tp.height
    if (not gfiles and not tstats) or (not tfiles and not gstats):
        causes.append("statistics vs tensors: one dump has statistics only (task statistics) "
                      "and the other tensors without statistics, so there is nothing to compare "
                      "them by")
    nodata = rows.filter(pl.col("verdict") == "no-data").height
    if nodata:
        causes.append(f"{nodata} matched tensors have neither files nor statistics on both "
                      "sides")
    gi = set(gp.get_column("op_id").unique().to_list())
    ti = set(tp.get_column("op_id").unique().to_list())
    if not gi & ti:
        causes.append(f"no op id in common (golden top-level ops {_ids(gi)}, target "
                      f"{_ids(ti)}): different models or wrong directories")
    elif not structure and (gi - ti or ti - gi):
        causes.append(f"the dumps selected different ops: golden {len(gi)} op ids, target "
                      f"{len(ti)}, {len(gi & ti)} in common (do the configs' ids, op_name, "
                      "save_child, exec_range agree?)")
    unread = rows.filter(pl.col("verdict") == "unreadable").height
    if unread:
        causes.append(f"{unread} tensors could not be read (see the reason column)")
    return causes or ["the tensors of the two dumps do not line up by op id path, name, stage, "
                      "io and index"]


def check_scope(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
                rows: pl.DataFrame, structure: list[str], min_matched: float = MIN_MATCHED,
                paired_by_id: bool = False, lost_why: dict[str, int] | None = None) -> Scope:
    """`lost_why`: why the engine did not compare some pairs (pairs per reason)."""
    ng, nt, checked = coverage(rows)
    s = Scope(ng, nt, checked, min_matched, structure, paired_by_id)
    s.lost_why = dict(lost_why or {})
    s.not_compared = rows.filter(pl.col("primary").fill_null(False)
                                 & (pl.col("verdict") == "not-compared")).height
    if s.incomplete:
        s.causes = likely_causes(g, t, pairs, rows, [] if paired_by_id else structure)
    if structure and paired_by_id:
        s.notes.append("tensors at the same op ids were paired across different op names, "
                       "as asked (pair by id)")
    return s
