"""Where a dump first looks wrong, before asking why: per process, the first
tensor holding NaN/Inf, tensors whose abs-max or norm jumps far past their
envelope (the same tensor in the model's other rounds, or the same op of the
other layers in the same round), the first overflow ATB or the probe reported
(info/overflow), and with a golden the first divergent tensor.

Only inputs before and outputs after an op count: an output buffer before the op
ran holds stale data. A jump is a hint, not a finding: the upstream walk
(walk.py) keeps it only when replay finds an op at fault behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from msprobe_atb.tree.models import model_kind
from msprobe_atb.tree.overflow_findings import ATB, ATB_BF16_FINITE, sentence

from ..read.dtypes import TOLERANCES
from ..read.tensor_ref import tensor_ref

# A statistic this many times its envelope is a jump. Layers of one model differ by
# a few times at most on the stand-in and by tens on real models (massive
# activations); an op gone wrong by a scale is off by hundreds.
JUMP_FACTOR = 50.0
# Statistics at or below this are zero for the purpose: they make no envelope.
TINY = 1e-30
# Jumps per process the walk starts from, at most (the earliest ones).
MAX_JUMPS = 4
# A weight is judged without a golden only against the same weight of at least this
# many layers (itself included): their median, which one bad layer cannot move.
WEIGHT_LAYERS = 4


def first_nonfinite(df: pl.DataFrame) -> list[dict]:
    """Per process, the first tensor in execution order with NaN/Inf; the list is
    ordered with the earliest round first."""
    bad = df.filter(pl.col("nonfinite") & pl.col("primary"))
    if bad.height == 0:
        return []
    firsts = bad.group_by("dev_pid", maintain_order=True).first()
    return [tensor_ref(r) for r in firsts.sort(["round", "seq"]).iter_rows(named=True)]


@dataclass
class Anomaly:
    kind: str  # "nonfinite", "jump", "divergence", "reported" or "false report"
    tensor: dict  # tensor_ref of the tensor
    what: str  # what is wrong with it, in a few words

    @property
    def seq(self) -> int:
        return self.tensor["seq"]


def _nonfinite_what(t: dict) -> str:
    counts = [(t.get(k), name) for k, name in (("nan", "NaN"), ("pinf", "+Inf"),
                                              ("ninf", "-Inf"))]
    said = ", ".join(f"{n} {name}" for n, name in counts if n)
    return f"holds {said}" if said else "holds NaN/Inf"


def _others_median(value: pl.Expr, by: list[str]) -> pl.Expr:
    """Per group of `by`, the median of `value`; in a group of two or three, the mean
    of the other rows' (with two layers, each is held against the other alone); nulls
    take no part."""
    n = value.count().over(by)
    total = value.sum().over(by)
    # in a small group (the usual: a few layers or rounds) one row weighs on the
    # median, so the mean of the others stands in for it
    return pl.when(n >= 4).then(value.median().over(by)).when(n >= 2) \
        .then((total - value) / (n - 1)).otherwise(None)


def jumps(df: pl.DataFrame, factor: float = JUMP_FACTOR) -> pl.DataFrame:
    """The finite float tensors whose abs-max or norm is past `factor` times its
    envelope, in execution order, with `jump` (how many times), `against` (rounds or
    layers) and `layers_n` (the layers it was held against, itself included).
    Envelopes are per process and model, in log space."""
    floats = df.filter(pl.col("primary") & ~pl.col("nonfinite")
                       & pl.col("dtype").is_in(list(TOLERANCES))
                       & pl.col("abs_max").is_finite() & pl.col("norm").is_finite())
    if floats.height == 0:
        return floats.with_columns(pl.lit(0.0).alias("jump"), pl.lit("").alias("against"))
    child = pl.col("op_id").str.replace(r"^\d+", "")
    inner = pl.col("op_name").str.replace(r"^[^/]*", "")
    models = floats.get_column("model").drop_nulls().unique().to_list() \
        if "model" in floats.columns else []
    kind = pl.col("model").replace_strict({m: model_kind(m) for m in models}, default="",
                                          return_dtype=pl.Utf8) if models else pl.lit("")
    floats = floats.with_columns(child.alias("_child"), inner.alias("_inner"),
                                 kind.alias("_kind"))
    tensor = ["stage", "io", "index"]
    rounds = ["dev_pid", "op_id", *tensor]
    layers = ["dev_pid", "round", "_kind", "_child", "_inner", *tensor]
    ratios = []
    for col in ("abs_max", "norm"):
        # a tensor that is all zeros (an empty KV cache) makes no envelope
        logv = pl.when(pl.col(col) > TINY).then(pl.col(col).log())
        for name, by in (("rounds", rounds), ("layers", layers)):
            env = _others_median(logv, by).exp()
            ratios.append((pl.col(col) / env).alias(f"_{col}_{name}"))
    floats = floats.with_columns(*ratios, pl.len().over(layers).alias("layers_n"))
    by_rounds = pl.max_horizontal("_abs_max_rounds", "_norm_rounds")
    by_layers = pl.max_horizontal("_abs_max_layers", "_norm_layers")
    out = floats.with_columns(
        pl.max_horizontal(by_rounds, by_layers).alias("jump"),
        pl.when(by_rounds.fill_null(0) >= by_layers.fill_null(0)).then(pl.lit("rounds"))
        .otherwise(pl.lit("layers")).alias("against"))
    return out.filter(pl.col("jump") > factor)


def reported(df: pl.DataFrame, events: list[dict]) -> list[Anomaly]:
    """Per process, the first overflow event of the dump's overflow logs
    (`events`: read/overflow_log.py) of `df`'s tensors, at its kernel's first output,
    and the first false report of ATB's (a finite bf16 +-2^121 it read as an fp16
    Inf): that one is no finding, only said."""
    held = set(df.select("dev_pid", "round", "op_id").unique().iter_rows())
    out: dict[tuple[str, str], Anomaly] = {}
    for e in events:
        tensors = [t for t in e["tensors"] if (t["dev_pid"], t["round"], t["op_id"]) in held]
        if not tensors:
            continue
        kind = "false report" if e["finding"] == sentence(ATB_BF16_FINITE) else "reported"
        at = next((t for t in tensors if t["io"] == "output"), tensors[0])
        out.setdefault((e["dev_pid"], kind), Anomaly(kind, at, e["finding"] or sentence(ATB)))
    return list(out.values())


def outlier_inputs(jumped: pl.DataFrame) -> list[tuple[dict, str]]:
    """The inputs of `jumped` (jumps(df)) past the factor against the same tensor of
    WEIGHT_LAYERS layers or more, each with what jumped: a weight among them is bad
    for sure (walk.py). A weight is the same in every round and its layers' copies
    are drawn alike, so one far past their median is no growth of the data, as an
    activation's or a KV cache's may be."""
    if jumped.height == 0:  # none: jumps() made none of its columns
        return []
    rows = jumped.filter((pl.col("io") == "input") & (pl.col("layers_n") >= WEIGHT_LAYERS)
                         & (pl.max_horizontal("_abs_max_layers", "_norm_layers") > JUMP_FACTOR))
    out = []
    for r in rows.iter_rows(named=True):
        absmax, norm = r["_abs_max_layers"] or 0, r["_norm_layers"] or 0
        stat, ratio = ("abs-max", absmax) if absmax >= norm else ("norm", norm)
        out.append((r, f"{stat} is {ratio:.3g}x its median over the model's {r['layers_n']} "
                       "layers"))
    return out


def find_anomalies(df: pl.DataFrame, jumped: pl.DataFrame, failures: pl.DataFrame | None,
                   events: list[dict]) -> dict[str, list[Anomaly]]:
    """Per process, its anomalies in execution order: the first NaN/Inf, the first
    jumps before it (`jumped`: jumps(df)), the first overflow ATB or the probe
    reported (`events`: reported), and with a golden (`failures`: the rows of `df`
    compare failed) the first divergent tensor."""
    found: dict[str, list[Anomaly]] = {}
    for a in reported(df, events):
        found.setdefault(a.tensor["dev_pid"], []).append(a)
    for t in first_nonfinite(df):
        found.setdefault(t["dev_pid"], []).append(Anomaly("nonfinite", t, _nonfinite_what(t)))
    earliest = (jumped.group_by("dev_pid", maintain_order=True).head(MAX_JUMPS)
                .iter_rows(named=True))
    for r in earliest:
        first = found.get(r["dev_pid"], [])
        if any(a.kind == "nonfinite" and a.seq < r["seq"] for a in first):
            continue  # after the first NaN/Inf: its consequence, not a start
        against = r["against"]
        stat = "abs-max" if (r[f"_abs_max_{against}"] or 0) >= (r[f"_norm_{against}"] or 0) \
            else "norm"
        what = f"{stat} {r['jump']:.3g}x its envelope over the other {against}"
        found.setdefault(r["dev_pid"], []).append(Anomaly("jump", tensor_ref(r), what))
    if failures is not None and failures.height:
        firsts = failures.group_by("dev_pid", maintain_order=True).first()
        for r in firsts.iter_rows(named=True):
            found.setdefault(r["dev_pid"], []).append(
                Anomaly("divergence", tensor_ref(r), "diverges from the golden"))
    return {dp: sorted(a, key=lambda x: x.seq) for dp, a in found.items()}
