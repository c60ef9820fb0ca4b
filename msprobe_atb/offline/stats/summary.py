"""`msprobe-atb stats`: what a dump holds, where NaN/Inf first appears and what
fed it, and the largest values per layer."""

from __future__ import annotations

import polars as pl

from msprobe_atb.tree.graph import (
    feeder_kinds,
    kv_cache_of,
    load_layer_graphs,
    load_model_graphs,
    upstream,
)
from msprobe_atb.tree.incidents import format_incident, read_incidents
from msprobe_atb.tree.models import model_kind, rounds_label

from ..diagnose.anomalies import first_nonfinite
from ..diagnose.engine import diagnose
from ..diagnose.text import diagnosis_json
from ..read.dtypes import TOLERANCES
from ..read.jsonsafe import jsonable as _num
from ..read.losses import format_losses, losses_summary
from ..read.table import Dump, op_path
from ..replay.text import brief, brief_line
from .overflow import event_line, logged_events


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _feeders(df: pl.DataFrame, ref: dict, graphs, models) -> list[dict]:
    """Upstream ops of a tensor, each with the statistics of its latest output
    written before the tensor (so the user sees which feeder went bad first)."""
    idx = int(ref["index"]) if str(ref["index"]).isdigit() else None
    ups = upstream(graphs, ref["op_id"], ref["io"], idx, models=models)
    proc = df.filter((pl.col("dev_pid") == ref["dev_pid"]) & (pl.col("seq") < ref["seq"])
                     & (pl.col("io") == "output") & pl.col("primary"))
    out = []
    for u in ups:
        item = {"op_id": u.op_id, "graph_name": u.op_name, "tensor": u.tensor,
                "feeds": u.consumer, "hops": u.depth}
        if u.op_id:
            rows = proc.filter(pl.col("op_id") == u.op_id).tail(1)
            if rows.height:
                r = rows.row(0, named=True)
                item.update(op=op_path(r["op_id"], r["op_name"]), nonfinite=r["nonfinite"],
                            zero=r["zero"], count=r["count"], min=_num(r["min"]),
                            max=_num(r["max"]), norm=_num(r["norm"]))
        out.append(item)
    return out


def _as_read(col: str) -> pl.Expr:
    """A tensor's statistic as a person reads it: NaN if the tensor holds NaN, inf if it
    holds +Inf or -Inf (max and min skip NaN: a finite abs-max of a tensor full of NaN
    would say it is fine), else the statistic."""
    uncounted = pl.col("nan").is_null() & pl.col("nonfinite") & pl.col(col).is_finite()
    return (pl.when(pl.col("nan") > 0).then(float("nan"))
            .when(pl.col("pinf") + pl.col("ninf") > 0).then(float("inf"))
            .when(uncounted).then(float("nan"))  # msProbe's: no counts, a NaN mean or norm
            .otherwise(pl.col(col)))


def float_tensors(df: pl.DataFrame) -> pl.DataFrame:
    """The float tensors of `df`: token ids and other integers are no activations,
    so no norm or abs-max of a layer (table or plot) counts them."""
    return df.filter(pl.col("dtype").is_in(list(TOLERANCES)))


def peaks(df: pl.DataFrame, by: list[str], col: str) -> pl.DataFrame:
    """Per group of `by`, over the float tensors among the inputs before and outputs
    after each op: the largest `col` (norm or abs_max) as `peak`, and the tensor
    holding it (`at`, `at_round`). A group with a tensor holding NaN/Inf has that
    non-finite value, at its first such tensor."""
    value = _as_read(col)
    bad = (value.is_nan() | value.is_infinite()).fill_null(False)
    floats = float_tensors(df.filter(pl.col("primary")))
    top = (floats.with_columns(value.alias("peak"), bad.alias("_bad"))
           .sort([pl.col("_bad"), pl.when(~pl.col("_bad")).then(pl.col("peak"))],
                 descending=True, nulls_last=True, maintain_order=True)
           .group_by(by, maintain_order=True).first())
    return top.select(*by, "peak", (pl.col("op_id") + " " + pl.col("io") + pl.col("index"))
                      .alias("at"), pl.col("round").alias("at_round"))


def per_layer(df: pl.DataFrame) -> pl.DataFrame:
    """Per top-level op (layer), in first-execution order: the largest norm and
    abs-max of its float tensors (peaks), and the tensors that hold them, plus
    NaN/Inf tensor counts."""
    df = df.filter(pl.col("primary"))
    if df.height == 0:
        return pl.DataFrame()
    agg = df.group_by("layer").agg(pl.col("seq").min().alias("_first"),
                                   pl.len().alias("tensors"),
                                   pl.col("nonfinite").sum().alias("nonfinite_tensors"))
    out = agg
    for col, name, rnd in (("norm", "max_norm", "norm_round"), ("abs_max", "max_abs",
                                                                 "abs_round")):
        out = out.join(peaks(df, ["layer"], col).rename(
            {"peak": name, "at": f"{name}_at", "at_round": rnd}), on="layer", how="left")
    return out.sort("_first").drop("_first")


def summarize(dump: Dump, df: pl.DataFrame | None = None, *, top: int = 10) -> dict:
    df = dump.tensors if df is None else df
    procs = []
    for (dp,), g in df.group_by(["dev_pid"], maintain_order=True):
        by_model: dict[str, list[int]] = {}
        for model, rnd in g.select("model", "round").unique().iter_rows():
            by_model.setdefault(model_kind(model), []).append(rnd)
        procs.append({"dev_pid": dp, "device": g.get_column("device")[0],
                      "rounds": sorted(g.get_column("round").unique().to_list()),
                      "rounds_by_model": {k: sorted(v) for k, v in sorted(
                          by_model.items(), key=lambda kv: (kv[0] != "prefill", kv[0]))},
                      "tensors": g.height, "ops": g.get_column("op_id").n_unique(),
                      "layers": g.get_column("layer").n_unique()})
    status = dict(df.group_by("status").len().iter_rows()) if df.height else {}
    firsts = first_nonfinite(df)
    # the root cause, as diagnose, compare, the report and incidents say it; its
    # replays give each first NaN/Inf's op its verdict (is it the op, its inputs or
    # the dtype?), so no op is replayed twice
    diagnosis = diagnose(dump, df, judge=[(f["dev_pid"], f["round"], f["op_id"])
                                          for f in firsts])
    graphs_cache: dict[str, tuple] = {}
    info = dump.layout.info
    for f in firsts:
        if f["dev_pid"] not in graphs_cache:
            graphs_cache[f["dev_pid"]] = (load_layer_graphs(info, f["dev_pid"], dump.problems),
                                          load_model_graphs(info, f["dev_pid"], dump.problems))
        f["upstream"] = _feeders(df, f, *graphs_cache[f["dev_pid"]])
        f["kv_cache"] = kv_cache_of(*graphs_cache[f["dev_pid"]], f["op_id"], f["io"],
                                    int(f["index"]) if str(f["index"]).isdigit() else None)
        f["replay"] = brief(diagnosis.verdicts.get((f["dev_pid"], f["round"], f["op_id"])))
    layers = per_layer(df)
    other = int((~df.get_column("primary")).sum()) if df.height else 0
    root = dump.layout.root
    return {
        "dump": str(dump.layout.root or dump.layout.given), "tensors": df.height,
        "diagnosis": diagnosis_json(diagnosis),
        **losses_summary(dump.layout),
        "processes": procs, "status": status, "problems": dump.problems,
        # statistics read from the tensors' files: the dump records none for them
        "stats_from_files": {"tensors": dump.stats_from_files, "bytes": dump.bytes_read},
        # the flight recorder's reports: what fired, where, which rounds were written
        "incidents": read_incidents(root) if root is not None else [],
        # the overflow task's events (info/overflow), each with who found it
        "overflow_events": logged_events(dump),
        # Tensors at the other two stages (before/outtensor, after/intensor), saved
        # only with save_all_stages; the findings use inputs before, outputs after.
        "other_stage_tensors": other,
        "nonfinite_tensors": int((df.get_column("nonfinite") & df.get_column("primary")).sum())
        if df.height else 0,
        "first_nonfinite": firsts,
        "layers": [{k: _num(v) for k, v in r.items()} for r in layers.head(1000).iter_rows(
            named=True)],
        "top": top,
    }


def ranges_text(values: list[int]) -> str:
    """[1, 2, 3, 6] -> '1-3,6': runs of consecutive numbers joined, gaps kept."""
    runs: list[list[int]] = []
    for v in sorted(values):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def rounds_text(p: dict) -> str:
    """A process's rounds, per model where each round's model is known:
    "prefill rounds 0-3 (4); decode rounds 0-11 (12)"."""
    by_model = p["rounds_by_model"]
    if not by_model or "" in by_model:
        return f"rounds {ranges_text(p['rounds'])} ({len(p['rounds'])})"
    return "; ".join(f"{rounds_label(r, k)} ({len(r)})" for k, r in by_model.items())


def no_nonfinite_text(s: dict) -> str:
    """The verdict of a summary `s` whose tensors hold no NaN/Inf: over every tensor
    only when the dump lost none and its derived files hold every record."""
    if not (s["lost"] or s["derived_behind"]):
        return "No NaN/Inf in any tensor."
    return (f"No NaN/Inf in the {s['tensors']} tensors read; "
            + (f"{s['lost']} selected tensors were lost and " if s["lost"] else
               "the records the derived files lack ")
            + "could not be checked.")


def format_text(s: dict) -> str:
    lines = [*s["diagnosis"]["lines"], f"Dump {s['dump']}: {s['tensors']} tensors"]
    for p in s["processes"]:
        lines.append(f"  process {p['dev_pid']} (device {p['device']}): {rounds_text(p)}"
                     f", {p['layers']} layers, {p['ops']} ops, "
                     f"{p['tensors']} tensors")
    if s["status"]:
        lines.append("  files: " + ", ".join(f"{k} {v}" for k, v in sorted(s["status"].items())))
    lines += format_losses(s, s["tensors"])
    filled = s["stats_from_files"]
    if filled["tensors"]:
        others = s["tensors"] - filled["tensors"]
        lines.append(f"  statistics of {filled['tensors']} tensors computed from their .bin files "
                     f"({filled['bytes'] / 2**20:.1f} MiB read: the dump records none for them, "
                     "e.g. task tensor)" + (f"; of the other {others} from statistic.csv or the "
                                            "manifest" if others > 0 else ""))
    if s["other_stage_tensors"]:
        lines.append(f"  stages: all four; {s['other_stage_tensors']} tensors are an output "
                     "buffer before its op ran or an input after it (in-place updates); the "
                     "findings below use inputs before and outputs after each op")
    for prob in s["problems"][:20]:
        lines.append(f"  problem: {prob}")
    if len(s["problems"]) > 20:
        lines.append(f"  ... and {len(s['problems']) - 20} more problems")
    lines.append("")
    if s["incidents"]:
        lines.append(f"FLIGHT RECORDER: {len(s['incidents'])} incident(s) "
                     "(msprobe-atb incidents DIR for the reports)")
        lines += ["  " + line for d in s["incidents"] for line in format_incident(d).split("\n")]
        lines.append("")
    if s["overflow_events"]:
        lines.append(f"OVERFLOW EVENTS: {len(s['overflow_events'])} (info/overflow; "
                     "msprobe-atb overflow DIR for their tensors)")
        lines += ["  " + event_line(e) for e in s["overflow_events"][:10]]
        lines.append("")
    if not s["first_nonfinite"]:
        lines.append(no_nonfinite_text(s))
    for f in s["first_nonfinite"]:
        lines.append(f"FIRST NaN/Inf in {f['dev_pid']}: {f['round_label']}, {f['op']} "
                     f"{f['io']} {f['index']} ({f['dtype']} {f['shape']}): "
                     f"nan {_fmt(f['nan'])}, +inf {_fmt(f['pinf'])}, -inf {_fmt(f['ninf'])}")
        if f.get("kv_cache"):
            lines.append(f"  a KV cache ({f['kv_cache']}): it carries a value an earlier round "
                         "wrote")
        if f["path"]:
            lines.append(f"  file: {f['path']}")
        if f.get("replay"):
            lines.append("  " + brief_line(f["replay"]))
        if f.get("upstream"):
            lines.append("  fed by (from info/layer, nearest first):")
            shown = [u for u in f["upstream"] if u["op_id"] or "nonfinite" in u]
            for u in shown:
                who = u.get("op") or u["op_id"]
                state = ""
                if "nonfinite" in u:
                    state = (f"  NaN/Inf={'yes' if u['nonfinite'] else 'no'} zeros="
                             f"{_fmt(u['zero'])}/{_fmt(u['count'])} min={_fmt(u['min'])} "
                             f"max={_fmt(u['max'])}")
                lines.append(f"    {'  ' * (u['hops'] - 1)}{who} via {u['tensor']}{state}")
            rest = [u for u in f["upstream"] if u not in shown]
            if rest:
                lines.append(f"    {'and ' if shown else ''}"
                             f"{feeder_kinds([u['graph_name'] for u in rest])} (no statistics: "
                             "not an op's output)")
        elif f is s["first_nonfinite"][0]:
            lines.append("  (no info/layer graph for this op: upstream unknown)")
    lines.append(f"{s['nonfinite_tensors']} tensors hold NaN/Inf in total.")
    if s["layers"]:
        lines.append("")
        lines.append("Per layer, over its float tensors (a layer holding NaN/Inf shows nan or inf, "
                     "at its first such tensor):")
        lines.append(f"{'layer':<28} {'max norm':>12} {'at':<22} {'max |x|':>12} "
                     f"{'at':<22} {'NaN/Inf':>7}")
        for r in s["layers"]:
            # a row whose Op Id cell is empty (a damaged CSV) belongs to no layer
            lines.append(f"{r['layer'] or '(no op id)':<28} {_fmt(r['max_norm']):>12} "
                         f"{str(r['max_norm_at']):<22} {_fmt(r['max_abs']):>12} "
                         f"{str(r['max_abs_at']):<22} {_fmt(r['nonfinite_tensors']):>7}")
    return "\n".join(lines)
