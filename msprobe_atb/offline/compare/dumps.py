"""`msprobe-atb compare`: a target dump against a golden one.

Tensors are matched by process pair, round, op id path, op name path, stage
(before/after), io and index (the n-th occurrence of the same key in a round
pairs with the n-th); leftovers on both sides then pair by op id path and the
names without their dtype tags (kernel names carry the dtype: AddF16Kernel vs
AddF32Kernel), noted in `reason`; across any names only with `pair_by_id`
(pairs.py, on row numbers and keys alone). Every tensor appears in the
result: matched pairs get metrics and a verdict, the rest are `golden-only` /
`target-only`. What the comparison covered, and whether
the two dumps have the same structure, is `scope` (scope.py): a
comparison that checked nothing or far too little, or of differently built
models, is `incomplete`, never a pass. A statistics-only dump against a tensor
dump without statistics is compared by statistics computed from the files.
Tensor dumps are compared element-wise (read/metrics.py; the cells named as
msProbe's columns then take its definitions: msprobe_cells.py); statistics-only
dumps by their statistics:
* Max, Min, Norm pass if |Δ| ≤ atol + 10·rtol·|golden| (10× the element
  tolerance of the target dtype, since statistics accumulate rounding);
* Mean passes if |Δ| ≤ atol + 10·rtol·rms(golden) (rms = Norm/sqrt(count));
* statistics printed with 6 decimals (msProbe's CSV) widen atol by their rounding;
* NaN/+Inf/−Inf counts must be equal when both sides have them.
A tensor passes if its non-finite values agree, within_tol ≥ --min-within (0.95)
and cosine ≥ --min-cosine (0.999) (tensor mode), or every statistic is within
(stats mode). Other verdicts: `unreadable` (a bad file, named in `reason`),
`not-saved` (filter_level-2 kernel stubs), `no-data`. The headline (first
divergent op, error growth) considers inputs before and outputs after each op;
an output buffer before the op ran (`before/outtensor*`) is compared but not
headlined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from msprobe_atb.tree.models import layer_of, round_label

from ..diagnose.engine import diagnose, failing_rows
from ..diagnose.text import diagnosis_json
from ..read.confine import REFUSED
from ..read.dtypes import TOLERANCES
from ..read.losses import format_losses, losses_summary
from ..read.models import model_map
from ..read.table import FILE_STATUSES, Dump, fill_missing_stats, op_path
from ..replay.text import brief
from .dask_connect import CONNECT_TIMEOUT_S
from .msprobe_cells import as_msprobe
from .pair_engine import EngineReport, pair_metrics
from .pairs import pair_rows, take
from .scope import MIN_MATCHED, Scope, check_scope, structure_differences

STATS_FACTOR = 10.0
EXIT_INCOMPLETE = 3
RESULT_COLUMNS = [
    "verdict", "mode", "golden_process", "target_process", "round", "op", "stage", "io",
    "index", "primary", "golden_dtype", "target_dtype", "golden_shape", "target_shape",
    "cosine", "max_abs_err", "max_rel_err", "max_rel_err_atol", "rmse", "rel_rmse",
    "within_tol", "rtol", "atol", "nonfinite_match",
    "golden_nan", "golden_pinf", "golden_ninf", "target_nan", "target_pinf", "target_ninf",
    "golden_max", "target_max", "golden_min", "target_min", "golden_mean", "target_mean",
    "golden_norm", "target_norm", "reason", "golden_path", "target_path", "target_seq",
    "golden_seq", "op_id", "op_name", "golden_module", "alignment",
]


@dataclass
class CompareResult:
    rows: pl.DataFrame  # RESULT_COLUMNS, in target execution order, then golden-only
    process_pairs: list[tuple[str, str]]
    unpaired: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    engine: EngineReport = field(default_factory=EngineReport)  # where the pairs ran
    scope: Scope = field(default_factory=Scope)
    # (process, "{id}_{Name}" of a layer-level op) -> its model, for "decode round 59"
    models: dict[tuple[str, str], str] = field(default_factory=dict)
    # replay's verdict on the target op of the first divergent tensor: the op, its
    # inputs or the dtype (replay/text.py brief)
    first_replay: dict | None = None
    # against a torch golden: what was aligned how, and what could not be
    # (torch_golden.TorchAlignment)
    torch_alignment: Any = None
    # the root cause in the target (diagnose/text.py diagnosis_json), its divergence included
    diagnosis: dict | None = None

    def round_label(self, row: dict) -> str:
        """The row's round named by its op's model: "prefill round 21"."""
        process = row.get("target_process") or row.get("golden_process") or row.get("process")
        return round_label(row["round"], self.models.get((process, layer_of(
            row.get("op_id"), row.get("op_name")))))

    def count(self, verdict: str) -> int:
        return self.rows.filter(pl.col("verdict") == verdict).height

    def exit_code(self) -> int:
        """3: incomplete (checked too little, or different structure); 1: a tensor
        diverges, could not be read or was not compared; 0: every checked tensor
        passes."""
        if self.scope.incomplete:
            return EXIT_INCOMPLETE
        unanswered = self.count("unreadable") + self.count("not-compared")
        return 1 if self.count("fail") or unanswered or self.scope.losses else 0


def pair_processes(g: pl.DataFrame, t: pl.DataFrame) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair golden and target processes: by device id when each side has one
    process per device, else in sorted order. Returns pairs and notes on leftovers."""
    gp, tp = (df.lazy().select("dev_pid", "device").unique().sort("dev_pid").collect().rows()
              for df in (g, t))
    gdev, tdev = [d for _, d in gp], [d for _, d in tp]
    pairs: list[tuple[str, str]] = []
    if len(set(gdev)) == len(gdev) and len(set(tdev)) == len(tdev) and set(gdev) & set(tdev):
        tby = {d: p for p, d in tp}
        pairs = [(p, tby[d]) for p, d in gp if d in tby]
    else:
        pairs = list(zip([p for p, _ in gp], [p for p, _ in tp]))
    used_g, used_t = {a for a, _ in pairs}, {b for _, b in pairs}
    notes = [f"golden process {p} has no target counterpart" for p, _ in gp if p not in used_g]
    notes += [f"target process {p} has no golden counterpart" for p, _ in tp if p not in used_t]
    return pairs, notes


# The columns of each side a result row needs (its process and round come from the pairing).
SIDE_COLUMNS = ["op_id", "op_name", "stage", "primary", "io", "index", "dtype", "shape", "max",
                "min", "mean", "norm", "count", "nan", "pinf", "ninf", "path", "status", "seq",
                "stat_step", "note"]


def _paired(g: pl.DataFrame, t: pl.DataFrame, pairs: list[tuple[str, str]],
            pair_by_id: bool) -> pl.DataFrame:
    """One row per result row, in order: `golden_*` and `target_*` SIDE_COLUMNS
    (null on the missing side), both processes, round, `_in_golden` / `_in_target`
    and the row number `_i`."""
    f = pair_rows(g, t, pairs, pair_by_id)
    parts = [take(df.select(SIDE_COLUMNS), f.get_column(rows)).rename(
        lambda c, s=side: f"{s}_{c}") for side, df, rows in (("golden", g, "gi"),
                                                            ("target", t, "ti"))]
    procs = [pl.lit(pl.Series([p[k] for p in pairs], dtype=pl.Utf8)).gather(pl.col("p"))
             .alias(name) for k, name in enumerate(("golden_dev_pid", "target_dev_pid"))]
    # which side has the tensor (its op id may be missing: an empty CSV cell)
    sides = [pl.col(rows).is_not_null().alias(f"_in_{side}")
             for side, rows in (("golden", "gi"), ("target", "ti"))]
    return pl.concat([f.select(*procs, "round", *sides), *parts],
                     how="horizontal").with_row_index("_i")


def _ok(g: pl.Expr, t: pl.Expr, tol: pl.Expr) -> pl.Expr:
    """A statistic agrees: within tol, or the same NaN/Inf; missing counts as agreeing."""
    return (pl.when(g.is_null() | t.is_null()).then(True)
            .when(g.is_nan() | t.is_nan()).then(g.is_nan() & t.is_nan())
            .when(g.is_infinite() | t.is_infinite()).then(g == t)
            .otherwise((t - g).abs() <= tol))


def _stats_columns(rtol: pl.Expr, atol: pl.Expr) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """Vectorised stats-mode metrics: nonfinite_match, rel_rmse (relative Norm error,
    for growth ranking) and a `_sbad` flag per statistic; and the expressions of
    the reason text (empty if all agree), for the flagged rows only: printing a
    million rows' statistics as text would cost more than the whole comparison."""
    rs = STATS_FACTOR * rtol

    def c(side: str, k: str) -> pl.Expr:
        return pl.col(f"{side}_{k}")

    # Statistics printed with 6 decimals (msProbe) are each off by up to half a step.
    atol = atol + 0.5 * (c("golden", "stat_step").fill_null(0.0)
                         + c("target", "stat_step").fill_null(0.0)) * (1 + 1e-6)

    def fmt(v: pl.Expr) -> pl.Expr:
        return v.cast(pl.Utf8).fill_null("-")

    flags, pieces = [], []

    def check(bad: pl.Expr, label: str, k: str) -> None:
        flags.append(bad.alias(f"_sbad_{k}"))
        pieces.append(pl.when(pl.col(f"_sbad_{k}")).then(pl.concat_str(
            [pl.lit(f"{label} "), fmt(c("golden", k)), pl.lit(" vs "), fmt(c("target", k))])))

    for k in ("max", "min", "norm"):
        g, t = c("golden", k), c("target", k)
        tol = pl.when(g.is_finite()).then(atol + rs * g.abs()).otherwise(0.0)
        check(~_ok(g, t, tol), k, k)
    gn, n = c("golden", "norm"), c("golden", "count")
    rms = pl.when(gn.is_finite() & (n > 0)).then(gn / n.cast(pl.Float64).sqrt()).otherwise(0.0)
    g, t = c("golden", "mean"), c("target", "mean")
    check(~_ok(g, t, atol + rs * rms), "mean", "mean")
    counts = ("nan", "pinf", "ninf")
    for k in counts:
        g, t = c("golden", k), c("target", k)
        check(g.is_not_null() & t.is_not_null() & (g != t), f"{k} count", k)
    have = pl.all_horizontal([c(s, k).is_not_null() for s in ("golden", "target")
                              for k in counts])
    match = pl.all_horizontal([c("golden", k) == c("target", k) for k in counts])
    gn, tn = c("golden", "norm"), c("target", "norm")
    d = (tn - gn).abs()
    rel = (pl.when(~gn.is_finite() | ~tn.is_finite())
           .then(pl.when((gn.is_nan() & tn.is_nan()) | (gn == tn)).then(0.0)
                 .otherwise(float("inf")))
           .when(gn == 0).then(pl.when(d == 0).then(0.0).otherwise(float("inf")))
           .otherwise(d / gn.abs()))
    no_stats = pl.all_horizontal([c(s, k).is_null() for s in ("golden", "target")
                                  for k in ("max", "norm", "nan")])
    return [
        *flags, pl.when(have).then(match).alias("_snf"), rel.alias("_srel"),
        no_stats.alias("_snostats"), (STATS_FACTOR * rtol).alias("_srtol"),
    ], [pl.concat_str(pieces, separator="; ", ignore_nulls=True).fill_null("").alias("_sreason")]


def _verdict(m: dict, min_within: float, min_cosine: float) -> tuple[str, str]:
    """Verdict of a tensor-mode pair from its metrics."""
    state = m.get("state", "ok")
    if state != "ok":
        return state, m.get("reason", "")
    if m.get("within_tol") is None:
        return "fail", m.get("reason") or "not comparable"
    why = []
    if not m.get("nonfinite_match", True):
        why.append(f"NaN/Inf differ (golden nan/+inf/-inf {m['golden_nan']}/"
                   f"{m['golden_pinf']}/{m['golden_ninf']}, target {m['target_nan']}/"
                   f"{m['target_pinf']}/{m['target_ninf']})")
    if m["within_tol"] < min_within:
        why.append(f"only {m['within_tol']:.2%} within rtol {m['rtol']:g} atol {m['atol']:g}")
    cos = m.get("cosine")
    if cos is not None and cos < min_cosine:
        why.append(f"cosine {cos:.6f} < {min_cosine}")
    return ("fail", "; ".join(why)) if why else ("pass", "")


def _stats_for_stats_only(golden: Dump, target: Dump) -> list[str]:
    """A statistics-only dump against tensors without statistics (task tensor):
    compute the latter's statistics from its files, so they can be compared."""
    def stats_only(d: Dump) -> bool:
        return d.tensors.height > 0 and d.tensors.get_column("path").null_count() == \
            d.tensors.height

    only = [s for s, d in (("golden", golden), ("target", target)) if stats_only(d)]
    if not only:
        return []
    notes = []
    for side, other in (("golden", target), ("target", golden)):
        o = other.tensors
        if side in only and o.filter(pl.col("path").is_not_null() & pl.col("max").is_null()
                                     ).height:
            fill_missing_stats(other)
            notes.append(f"the {'target' if side == 'golden' else 'golden'} dump's statistics "
                         "were computed from its .bin files")
    who = "both dumps have" if len(only) == 2 else f"the {only[0]} dump has"
    return [f"{who} statistics only (no .bin files): tensors are compared by Max/Min/Mean/Norm "
            "and NaN/Inf counts, not element by element", *notes]


def compare_dumps(golden: Dump, target: Dump, *, rtol: float | None = None,
                  atol: float | None = None, min_within: float = 0.95,
                  min_cosine: float = 0.999, jobs: int = 1,
                  progress: Callable[[int], None] | None = None,
                  scheduler: str | None = None, pair_by_id: bool = False,
                  min_matched: float = MIN_MATCHED,
                  total: Callable[[int], None] | None = None,
                  engine: str = "auto",
                  connect_timeout: float = CONNECT_TIMEOUT_S) -> CompareResult:
    """`progress(n)` after every n tensor pairs compared, `total(n)` once with their
    number; `pair_by_id` pairs tensors at the same op ids across different names;
    `engine` (auto, local-cluster, in-process) or `scheduler` (an existing Dask
    cluster, answering within `connect_timeout` s) is where the pairs run
    (pair_engine.py)."""
    scope_notes = _stats_for_stats_only(golden, target)
    g, t = golden.tensors, target.tensors
    if len(golden.layout.rounds) == 1 and len(target.layout.rounds) == 1:
        # Two round dirs, as with msProbe's compare: pair them whatever their numbers.
        t = t.with_columns(pl.lit(g.get_column("round")[0] if g.height else 0,
                                  dtype=pl.Int64).alias("round"))
    pairs, notes = pair_processes(g, t)
    j = _paired(g, t, pairs, pair_by_id)
    both = pl.col("_in_golden") & pl.col("_in_target")

    tdt = pl.col("target_dtype").fill_null("")
    rt = pl.lit(rtol, pl.Float64) if rtol is not None else \
        tdt.replace_strict({k: v[0] for k, v in TOLERANCES.items()}, default=0.0,
                           return_dtype=pl.Float64)
    at = pl.lit(atol, pl.Float64) if atol is not None else \
        tdt.replace_strict({k: v[1] for k, v in TOLERANCES.items()}, default=0.0,
                           return_dtype=pl.Float64)
    files = both & pl.all_horizontal(
        [pl.col(f"{s}_path").is_not_null() & pl.col(f"{s}_status").is_in(FILE_STATUSES)
         for s in ("golden", "target")])
    j = j.with_columns(
        pl.when(~both).then(pl.lit("-")).when(files).then(pl.lit("tensor"))
        .otherwise(pl.lit("stats")).alias("mode"),
        rt.alias("_rt"), at.alias("_at"))
    flags, reason_text = _stats_columns(pl.col("_rt"), pl.col("_at"))
    j = j.with_columns(flags)
    bad = pl.any_horizontal(pl.col("^_sbad_.*$").fill_null(False))
    reasons = j.filter(bad).select("_i", *reason_text)
    j = j.drop(pl.col("^_sbad_.*$")).with_columns(
        pl.repeat("", j.height, dtype=pl.Utf8, eager=True).scatter(
            reasons.get_column("_i"), reasons.get_column("_sreason")).alias("_sreason"))

    work = j.filter(pl.col("mode") == "tensor")
    if total:
        total(work.height)
    tens, report = pair_metrics(work, rtol, atol, jobs, progress, scheduler, engine,
                                connect_timeout)
    verdicts = [_verdict(m, min_within, min_cosine) for m in tens.iter_rows(named=True)]
    tens = tens.drop("state", "reason").with_columns(
        pl.Series("verdict", [v for v, _ in verdicts], pl.Utf8),
        pl.Series("reason", [r for _, r in verdicts], pl.Utf8))
    # put in place by row number (`_i` is the row), not joined to the wide table
    j = j.with_columns(
        pl.repeat(None, j.height, dtype=tens.schema[c], eager=True)
        .scatter(tens.get_column("_i"), tens.get_column(c))
        .alias(f"{c}_m" if c in j.columns else c) for c in tens.columns if c != "_i")

    def pick(c: str) -> pl.Expr:
        return pl.coalesce(f"target_{c}", f"golden_{c}")

    stats = pl.col("mode") == "stats"
    renamed = both & (pl.col("golden_op_name") != pl.col("target_op_name"))
    # a row whose file path left its dump root (read/confine.py) is not compared
    refused = [pl.col(f"{s}_status") == REFUSED for s in ("target", "golden")]
    verdict = (pl.when(~pl.col("_in_golden")).then(pl.lit("target-only"))
               .when(~pl.col("_in_target")).then(pl.lit("golden-only"))
               .when(refused[0] | refused[1]).then(pl.lit("unreadable"))
               .when(stats & pl.col("_snostats")).then(pl.lit("no-data"))
               .when(stats).then(pl.when(pl.col("_sreason") == "").then(pl.lit("pass"))
                                 .otherwise(pl.lit("fail")))
               .otherwise(pl.col("verdict")))
    reason = (pl.when(~pl.col("_in_golden"))
              .then(pl.lit("no tensor with this op path/io/index in the golden dump"))
              .when(~pl.col("_in_target"))
              .then(pl.lit("no tensor with this op path/io/index in the target dump"))
              .when(refused[0]).then(pl.lit("target ") + pl.col("target_note"))
              .when(refused[1]).then(pl.lit("golden ") + pl.col("golden_note"))
              .when(stats & pl.col("_snostats")).then(pl.lit("neither files nor statistics"))
              .when(stats).then(pl.col("_sreason")).otherwise(pl.col("reason")))
    reason = (pl.when(renamed).then(pl.concat_str(
        [pl.lit("matched by op id; golden name "), pl.col("golden_op_name"),
         pl.when(reason != "").then(pl.lit("; ") + reason).otherwise(pl.lit(""))]))
        .otherwise(reason))
    # op paths are built once per distinct op, not once per row
    ids = j.select(pick("op_id").alias("_oid"), pick("op_name").alias("_oname"))
    uniq = ids.unique()
    uniq = uniq.with_columns(pl.Series("op", [op_path(i, n) for i, n in uniq.iter_rows()],
                                       pl.Utf8))
    ops = ids.join(uniq, on=["_oid", "_oname"], how="left", nulls_equal=True,
                   maintain_order="left").get_column("op")
    out = j.with_columns(ops).select(
        verdict.alias("verdict"), "mode", pl.col("golden_dev_pid").alias("golden_process"),
        pl.col("target_dev_pid").alias("target_process"), "round", "op",
        pick("stage").alias("stage"), pick("io").alias("io"), pick("index").alias("index"),
        pick("primary").alias("primary"), "golden_dtype", "target_dtype", "golden_shape",
        "target_shape", "cosine", "max_abs_err", "max_rel_err", "max_rel_err_atol", "rmse",
        pl.when(stats).then(pl.col("_srel")).otherwise(pl.col("rel_rmse")).alias("rel_rmse"),
        "within_tol",
        pl.when(stats).then(pl.col("_srtol")).otherwise(pl.col("rtol")).alias("rtol"),
        pl.when(pl.col("mode") == "-").then(None).otherwise(pl.coalesce("atol", "_at"))
        .alias("atol"),
        pl.when(stats).then(pl.col("_snf")).otherwise(pl.col("nonfinite_match"))
        .alias("nonfinite_match"),
        *[pl.coalesce(f"{s}_{k}_m", f"{s}_{k}").alias(f"{s}_{k}")
          for s in ("golden", "target") for k in ("nan", "pinf", "ninf")],
        *[f"{s}_{k}" for k in ("max", "min", "mean", "norm") for s in ("golden", "target")],
        reason.alias("reason"), "golden_path", "target_path", "target_seq", "golden_seq",
        pick("op_id").alias("op_id"), pick("op_name").alias("op_name"),
        # against a torch golden (torch_golden.py): its module, and how it was aligned
        pl.lit(None, pl.Utf8).alias("golden_module"), pl.lit(None, pl.Utf8).alias("alignment"),
    )
    rows = as_msprobe(out.select(RESULT_COLUMNS))
    structure = structure_differences(g, t, pairs, golden.layout.info, target.layout.info)
    scope = check_scope(g, t, pairs, rows, structure, min_matched, pair_by_id,
                        report.lost_why)
    scope.losses, param_notes = _losses(golden, target)
    scope.notes = scope_notes + scope.notes + param_notes
    res = CompareResult(rows, pairs, notes, golden.problems + target.problems, engine=report,
                        scope=scope, models={**model_map(g), **model_map(t)})
    fd = first_divergence(res)
    # the first divergent op's replay verdict (is it the op, its inputs or the dtype?)
    # comes from the diagnosis' replays, so no op is replayed twice
    first = [(fd["target_process"], fd["round"], fd["op_id"])] \
        if fd is not None and fd["op_id"] is not None else []
    # an incomplete comparison's failures may pair different ops: the target alone then
    diagnosis = diagnose(target, t, failures=None if scope.incomplete else failing_rows(t, rows),
                         judge=first)
    res.diagnosis = diagnosis_json(diagnosis)
    if first:
        res.first_replay = brief(diagnosis.verdicts.get(first[0]))
    return res


def _losses(golden: Dump, target: Dump) -> tuple[list[str], list[str]]:
    """What each dump root lost or its derived files lack, as `stats` says it (not a
    pass), and the notes of roots that lost op_param.json files only (their tensors
    are all compared; replay lacks those ops' params)."""
    lines, notes = [], []
    for side, dump in (("golden", golden), ("target", target)):
        for layout in dump.layouts():
            s = losses_summary(layout)
            if s["lost"] or s["derived_behind"]:
                lines.append(f"  {side} {layout.root}:")
                lines += ["  " + line for line in format_losses(s, _rows_of(dump, layout))]
            elif s["params_lost"]:
                notes.append(f"{side} {layout.root}: {s['params_lost']} op_param.json files "
                             "were not written; `msprobe-atb replay` cannot replay their ops")
    return lines, notes


def _rows_of(dump: Dump, layout) -> int:
    """The tensor rows read from one root of `dump`."""
    if len(dump.layouts()) == 1:
        return dump.tensors.height
    procs = {rd.dev_pid for rd in layout.rounds}
    return dump.tensors.filter(pl.col("dev_pid").is_in(procs)).height


FRESH_ERROR_IN = 1e-7  # ranks an error from exact inputs: as if from fp32 rounding


def error_growth(res: CompareResult, top: int = 5) -> list[dict]:
    """Ops whose outputs' error exceeds their inputs' error the most (`growth`,
    the worst output error over the worst input error). The error of a tensor
    is its relative RMSE (stats mode: relative Norm error), infinite where the
    NaN/Inf pattern differs. An error from exact inputs has no ratio: its
    `growth` is None (`from_zero`), and it ranks as if its inputs' error were
    FRESH_ERROR_IN."""
    err = (pl.when(pl.col("nonfinite_match") == False)  # noqa: E712 (null: unknown)
           .then(float("inf")).otherwise(pl.col("rel_rmse").fill_nan(0.0).fill_null(0.0)))
    ops = (res.rows.filter(pl.col("verdict").is_in(["pass", "fail"]) & pl.col("primary"))
           .with_columns(err.alias("_e"))
           .group_by(["target_process", "round", "op_id"])
           .agg(pl.col("op").first(), pl.col("op_name").first(),
                pl.col("target_seq").min().alias("seq"),
                pl.col("_e").filter(pl.col("io") == "input").max().fill_null(0.0)
                .alias("err_in"),
                pl.col("_e").filter(pl.col("io") == "output").max().fill_null(0.0)
                .alias("err_out")))
    rank = (pl.when(pl.col("err_out").is_infinite())
            .then(pl.when(pl.col("err_in").is_infinite()).then(1.0).otherwise(float("inf")))
            .otherwise(pl.col("err_out") / pl.max_horizontal(pl.col("err_in"), FRESH_ERROR_IN)))
    from_zero = (pl.col("err_in") == 0) & pl.col("err_out").is_finite()
    # Ties (an Inf shows up in an op and in every parent holding it): deepest op first.
    ops = (ops.with_columns(rank.alias("_rank"), from_zero.alias("from_zero"),
                            pl.col("op").str.count_matches("/").alias("_depth"))
           .filter(pl.col("_rank") > 1.0)
           .sort(["_rank", "_depth", "seq"], descending=[True, True, False], nulls_last=True))
    return [{"op": r["op"], "op_id": r["op_id"], "op_name": r["op_name"], "round": r["round"],
             "process": r["target_process"],
             "err_in": r["err_in"], "err_out": r["err_out"], "seq": r["seq"],
             "growth": None if r["from_zero"] else r["_rank"], "from_zero": r["from_zero"]}
            for r in ops.head(top).iter_rows(named=True)]


def first_divergence(res: CompareResult) -> dict | None:
    """The first failing pair: each target process' first in its execution order,
    and of those the earliest by round and position within the round (ranks run
    the same ops in the same order; their sequence numbers are not comparable)."""
    pos = pl.col("target_seq").rank("ordinal").over(["target_process", "round"])
    bad = (res.rows.with_columns(pos.alias("_pos"))
           .filter((pl.col("verdict") == "fail") & pl.col("primary"))
           .group_by("target_process", maintain_order=True).first()
           .sort(["round", "_pos"], maintain_order=True, nulls_last=True))
    return bad.select(res.rows.columns).row(0, named=True) if bad.height else None

