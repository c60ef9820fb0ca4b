"""The report's interactive plots, as Plotly figure specs (plain dicts that the
page hands to Plotly.newPlot). Layers are ordered by op id and every device has
its own traces; a non-finite point is never dropped: its line breaks there and a
marker along the top edge says what it was (✕; where the NaN/Inf pattern differs
from golden, in a colour of its own, and such a layer is never on a line of
finite-only metrics). Axes: axes.py. Names from the dump go only into
data keys (x, text, name, ...; page_text.plot_json escapes those), never into a
title or hovertemplate (where Plotly reads markup); a hover without <extra>
shows its trace's name beside it."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import polars as pl

from ..stats.summary import float_tensors
from .axes import (
    finite,
    flag_band,
    layer_axis,
    linear_axis,
    log_axis,
    overlay_axis,
    title,
    top_of,
)

MAX_ROUND_LINES = 8
FP16_MAX = 65504.0
BF16_MAX = 3.3895313892515355e38
# Plotly's default colour cycle, so that a round keeps its colour on every plot.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
NONFINITE_Y = 0.97  # where non-finite markers sit, in the overlay axis' 0..1
FLAG_STEP = 0.04  # each further series' markers sit this much lower (0..1), not on top
FLAG_ROWS = 3  # rows of markers within the band (report_axes.FLAG_BAND)
DIFFER_COLOUR = "#b0006e"  # "NaN/Inf differ from golden": no line has this colour
DIFFER = "NaN/Inf differ"
MAX_SCATTER = 4000  # elements drawn in the golden-vs-target plot


def layer_key(name: str) -> tuple:
    """'12_Prefill_layer' sorts after '2_Prefill_layer': by the numeric op id first."""
    head, _, rest = name.partition("_")
    return (int(head), rest) if head.isdigit() else (math.inf, name)


def shown_rounds(rounds: Iterable[int]) -> list[int]:
    """At most MAX_ROUND_LINES rounds, spread evenly, first and last kept."""
    rs = sorted(set(rounds))
    if len(rs) <= MAX_ROUND_LINES:
        return rs
    return sorted({rs[int(i)] for i in np.linspace(0, len(rs) - 1, MAX_ROUND_LINES)})


def fmt_value(v) -> str:
    """A number as a person reads it: 6 significant digits, nan/inf/-inf spelled out."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.6g}"
    return str(v)


def per_layer(df: pl.DataFrame, value: str) -> pl.DataFrame:
    """Per (device, round, layer): the largest finite `value`, and whether any
    tensor there had a non-finite one (NaN or ±Inf), with their count."""
    v = pl.col(value)
    return (df.filter(v.is_not_null())
            .group_by(["device", "round", "layer"])
            .agg(v.filter(v.is_finite()).max().alias("finite_max"),
                 (~v.is_finite()).sum().alias("nonfinite"),
                 v.filter(~v.is_finite()).first().alias("bad_value")))



def _flag_trace(name: str, xs: list, texts: list[str], row: int, colour: str, *,
                fill: str = "#c00", legend: bool = False) -> dict:
    """✕ markers along the top edge (overlay axis y2), one per flagged layer."""
    return {"type": "scatter", "mode": "markers", "yaxis": "y2", "name": name,
            "legendgroup": name, "showlegend": legend, "x": xs,
            "y": [NONFINITE_Y - FLAG_STEP * (row % FLAG_ROWS)] * len(xs), "text": texts,
            "hovertemplate": "%{text}",
            "marker": {"symbol": "x", "size": 11, "color": fill,
                       "line": {"width": 1.5, "color": colour}}}


def _line_traces(per: pl.DataFrame, order: list[str], label: str, *, dash: str = "solid",
                 prefix: str = "", first_row: int = 0) -> list[dict]:
    """One line per (device, round) over the layers in `order`, broken at
    non-finite points, plus one marker trace of those points on the overlay axis."""
    traces: list[dict] = []
    row, series = first_row, 0
    for dev in sorted(per.get_column("device").unique().to_list()):
        dsub = per.filter(pl.col("device") == dev)
        for rnd in shown_rounds(dsub.get_column("round").to_list()):
            rows = {r["layer"]: r for r in dsub.filter(pl.col("round") == rnd)
                    .iter_rows(named=True)}
            colour = COLOURS[series % len(COLOURS)]  # golden's same series: same colour
            series += 1
            name = f"{prefix}dev {dev} · round {rnd}"
            ys, bad_x, bad_text = [], [], []
            for layer in order:
                r = rows.get(layer)
                if r is None:
                    ys.append(None)
                    continue
                if r["nonfinite"]:
                    ys.append(None)  # the line breaks here: nothing finite to draw
                    bad_x.append(layer)
                    bad_text.append(f"{layer}: {label} {fmt_value(r['bad_value'])} "
                                    f"({r['nonfinite']} tensor(s) NaN/Inf)")
                else:
                    ys.append(r["finite_max"] if r["finite_max"] and r["finite_max"] > 0
                              else None)
            traces.append({"type": "scatter", "mode": "lines+markers", "name": name,
                           "legendgroup": name, "x": order, "y": ys,
                           "line": {"color": colour, "dash": dash, "width": 1.5},
                           "marker": {"size": 5}, "connectgaps": False,
                           "hovertemplate": f"%{{x}}: {label} %{{y:.6g}}"})
            if bad_x:
                traces.append(_flag_trace(f"{name}: NaN/Inf", bad_x, bad_text, row, colour))
                row += 1
    return traces


def _ys(traces: list[dict], axis: str = "y") -> list:
    return [v for t in traces if t.get("yaxis", "y") == axis for v in t["y"]]


def _band(traces: list[dict]) -> list[dict]:
    """The shaded band for ✕ markers, where there are any."""
    return [flag_band()] if any(t.get("yaxis") in ("y2", "y3") and t.get("mode") == "markers"
                                for t in traces) else []


def _legend() -> dict:
    return {"font": {"size": 10}}


def norm_figure(df: pl.DataFrame, golden: pl.DataFrame | None, order: list[str],
                aligned: pl.DataFrame | None = None) -> dict:
    """The largest norm of the float tensors per layer (as the layer table), and
    golden's dotted. A torch golden holds only the tensors aligned with this
    dump's (`aligned`): this dump over those is drawn dashed beside it, so that
    a gap is never one side's tensor without a counterpart (a KV cache)."""
    floats = float_tensors(df)
    traces = _line_traces(per_layer(floats, "norm"), order, "norm")
    what = ""
    if golden is not None and golden.height:
        prefix, what = "golden ", " (dotted: golden)"
        if aligned is not None:
            shown = float_tensors(aligned)
            prefix = "torch golden "
            traces += _line_traces(
                per_layer(shown, "norm"), order, "norm", dash="dash",
                prefix=f"the {shown.height} of {floats.height} float tensors with a torch "
                       "counterpart: ",
                first_row=_marked(traces))
            what = " (dotted: torch golden; dashed: this dump over the same tensors)"
        traces += _line_traces(per_layer(float_tensors(golden), "norm"), order, "norm",
                               dash="dot", prefix=prefix, first_row=_marked(traces))
    return {"data": traces, "layout": {
        "title": title("Largest L2 norm per layer, float tensors only" + what +
                       "; ✕ at the top: NaN/Inf there"),
        "xaxis": layer_axis(order), "yaxis": log_axis("L2 norm", _ys(traces), band=True),
        "yaxis2": overlay_axis(), "shapes": _band(traces), "hovermode": "closest",
        "height": 480,
        "legend": _legend()}}


def _marked(traces: list[dict]) -> int:
    """How many ✕ rows the traces use: the next series' markers go below them."""
    return sum(1 for t in traces if t.get("yaxis") == "y2")


def absmax_figure(df: pl.DataFrame, order: list[str]) -> dict:
    floats = float_tensors(df)
    traces = _line_traces(per_layer(floats, "abs_max"), order, "|x| max")
    dtypes = set(floats.get_column("dtype").unique().to_list())
    limits = [("fp16 max 65504", FP16_MAX)]
    if "bf16" in dtypes:
        limits.append(("bf16 max 3.39e38", BF16_MAX))
    shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": v,
               "y1": v, "line": {"color": "#c00", "dash": "dash", "width": 1}}
              for _, v in limits]
    notes = [{"xref": "paper", "x": 0, "xanchor": "left", "yref": "y", "y": math.log10(v),
              "text": t, "showarrow": False, "font": {"color": "#c00", "size": 10},
              "yanchor": "bottom"} for t, v in limits]
    return {"data": traces, "layout": {
        "title": title("Largest |value| per layer, float tensors only; dashed: dtype limits"),
        "xaxis": layer_axis(order),
        "yaxis": log_axis("max |x|", [*_ys(traces), *(v for _, v in limits)], band=True),
        "yaxis2": overlay_axis(), "shapes": [*_band(traces), *shapes], "annotations": notes,
        "hovermode": "closest", "height": 480, "legend": _legend()}}


def nan_map_figures(df: pl.DataFrame, order: list[str]) -> list[dict]:
    """One heatmap per device with a NaN/Inf tensor; none when all are finite."""
    per = (df.group_by(["device", "round", "layer"])
           .agg(pl.col("nonfinite").sum().alias("n")))
    figs = []
    for dev in sorted(per.get_column("device").unique().to_list()):
        sub = per.filter(pl.col("device") == dev)
        if not sub.get_column("n").sum():
            continue
        rounds = sorted(sub.get_column("round").unique().to_list())
        cell = {(r["round"], r["layer"]): r["n"] for r in sub.iter_rows(named=True)}
        z = [[cell.get((rnd, layer)) for layer in order] for rnd in rounds]
        figs.append({"data": [{"type": "heatmap", "x": order, "y": [str(r) for r in rounds],
                               "z": z, "colorscale": "Reds", "zmin": 0,
                               "colorbar": {"title": {"text": "tensors with NaN/Inf",
                                                      "side": "right"}},
                               "hovertemplate": "round %{y}, %{x}: %{z} tensor(s) NaN/Inf"
                                                "<extra></extra>"}],
                     "layout": {"title": title(f"Tensors holding NaN/Inf, device {dev}"),
                                "xaxis": layer_axis(order),
                                "yaxis": {"title": {"text": "round"}, "type": "category"},
                                "height": min(720, 300 + 22 * len(rounds))}})
    return figs


def _as_floats(values) -> np.ndarray:
    v = np.asarray(values).ravel()
    return (np.abs(v) if v.dtype.kind == "c" else v).astype(np.float64, copy=False)


def _nonfinite_counts(v: np.ndarray) -> str:
    return (f"NaN {int(np.isnan(v).sum())}, +Inf {int(np.isposinf(v).sum())}, "
            f"-Inf {int(np.isneginf(v).sum())}")


def histogram_figure(tensors: list[tuple[str, np.ndarray]], bins: int = 60,
                     heading: str = "Values of the first NaN/Inf tensor and of its op's "
                                    "inputs (finite values; the legend counts the others)"
                     ) -> dict:
    """Histograms of the finite values of each (label, values), over the same
    bins; the non-finite counts are in each trace's name, so nothing is silently
    left out."""
    arrays = [(label, _as_floats(v)) for label, v in tensors]
    finite_all = [v[np.isfinite(v)] for _, v in arrays]
    pooled = np.concatenate(finite_all) if finite_all else np.array([])
    edges = np.histogram_bin_edges(pooled, bins=bins) if pooled.size else np.array([0.0, 1.0])
    centres = ((edges[:-1] + edges[1:]) / 2).tolist()
    width = float(edges[1] - edges[0])
    traces, counts = [], []
    for (label, v), fin in zip(arrays, finite_all):
        hist = np.histogram(fin, bins=edges)[0] if fin.size else np.zeros(len(centres), int)
        counts += hist.tolist()
        traces.append({"type": "bar", "name": f"{label} ({_nonfinite_counts(v)})",
                       "x": centres, "y": [int(c) if c else None for c in hist],
                       "width": width, "opacity": 0.6,
                       "hovertemplate": "%{x:.4g}: %{y} values"})
    return {"data": traces, "layout": {
        "title": title(heading), "barmode": "overlay",
        "yaxis": log_axis("count", counts), "height": 440,
        "xaxis": linear_axis("value", [pooled.min(), pooled.max()] if pooled.size else [],
                             range=[float(edges[0]), float(edges[-1])]),
        "legend": _legend()}}


def value_figure(golden: np.ndarray, target: np.ndarray) -> dict:
    """The first divergent tensor, golden against target element by element (up to
    MAX_SCATTER elements: the largest differences and an even sample of the rest),
    the line y = x, and a ✕ along the top for every element non-finite on one
    side only; tensors of different sizes: their histograms on the same bins."""
    g, t = _as_floats(golden), _as_floats(target)
    if g.size != t.size:
        return histogram_figure([("golden", g), ("target", t)],
                                heading="Golden and target values (their sizes differ: "
                                        "not element by element)")
    both = np.isfinite(g) & np.isfinite(t)
    differ = np.flatnonzero(np.isfinite(g) != np.isfinite(t))
    idx = np.flatnonzero(both)
    if idx.size > MAX_SCATTER:
        worst = idx[np.argpartition(np.abs(t[idx] - g[idx]), -MAX_SCATTER // 10)
                    [-MAX_SCATTER // 10:]]
        even = idx[np.linspace(0, idx.size - 1, MAX_SCATTER - worst.size).astype(np.int64)]
        idx = np.union1d(worst, even)
    lo = float(min(g[idx].min(), t[idx].min())) if idx.size else 0.0
    hi = float(max(g[idx].max(), t[idx].max())) if idx.size else 1.0
    pad = 0.04 * (hi - lo) or 0.5
    traces = [{"type": "scatter", "mode": "markers", "x": g[idx].tolist(), "y": t[idx].tolist(),
               "name": f"{idx.size} of {int(both.sum())} elements finite on both sides",
               "customdata": idx.tolist(), "marker": {"size": 4, "color": COLOURS[0]},
               "hovertemplate": "element %{customdata}: golden %{x:.6g}, target %{y:.6g}"},
              {"type": "scatter", "mode": "lines", "x": [lo, hi], "y": [lo, hi],
               "name": "target = golden", "hoverinfo": "skip",
               "line": {"color": "#888", "dash": "dash", "width": 1}}]
    if differ.size:
        shown = differ[:MAX_SCATTER]
        xs = [float(g[i]) if np.isfinite(g[i]) else None for i in shown]
        texts = [f"element {i}: golden {fmt_value(float(g[i]))}, target "
                 f"{fmt_value(float(t[i]))}" for i in shown]
        traces.append(_flag_trace(f"{DIFFER}: {differ.size} element(s)", xs, texts, 0,
                                  DIFFER_COLOUR, fill=DIFFER_COLOUR, legend=True))
    return {"data": traces, "layout": {
        "title": title("Golden against target, element by element (✕ at the top: NaN/Inf "
                       "on one side only, at the golden value)"),
        "xaxis": linear_axis("golden value", [lo, hi]),
        "yaxis": linear_axis("target value", [lo, hi],
                             range=[lo - pad, top_of(lo - pad, hi + pad, True)]),
        "yaxis2": overlay_axis(), "shapes": [flag_band()] if differ.size else [],
        "hovermode": "closest", "height": 460, "legend": _legend()}}


def _differ() -> pl.Expr:
    return (pl.col("nonfinite_match") == False).fill_null(False)  # noqa: E712 (null: unknown)


def layer_growth(rows: pl.DataFrame) -> pl.DataFrame:
    """Per (target process, round, layer) of the checked output tensors: the
    relative error of the layer's own outputs (its shallowest dumped ops; null
    where their NaN/Inf pattern differs from golden: finite-only metrics would
    call them agreeing), and the outputs whose pattern differs: how many, of
    how many, and the first in execution order."""
    keys = ["target_process", "round", "layer"]
    r = rows.with_columns(pl.col("op").str.split("/").list.first().alias("layer"),
                          pl.col("op_id").str.count_matches("_").alias("_depth"),
                          _differ().alias("_differ"))
    r = r.with_columns((pl.col("_depth") == pl.col("_depth").min().over(keys)).alias("_top"))
    e = pl.col("rel_rmse")
    own = pl.col("_top") & ~pl.col("_differ") & e.is_finite()
    return r.group_by(keys).agg(
        e.filter(own).max().alias("err"),
        pl.col("op").filter(own).sort_by(e.filter(own)).last().alias("worst"),
        (pl.col("_top") & pl.col("_differ")).any().alias("top_differ"),
        pl.col("_differ").sum().alias("differ"), pl.len().alias("outputs"),
        pl.format("{} output{}", "op", "index").filter(pl.col("_differ"))
        .sort_by(pl.col("target_seq").filter(pl.col("_differ"))).first().alias("first"))


def error_growth_figure(rows: pl.DataFrame, order: list[str]) -> dict:
    """The relative error at each layer's output, one line per (target process,
    round), each point at its own layer; a ✕ where outputs' NaN/Inf pattern
    differs from golden, one per layer and line."""
    per = layer_growth(rows)
    traces: list[dict] = []
    row = series = 0
    for proc in sorted(per.get_column("target_process").unique().to_list()):
        psub = per.filter(pl.col("target_process") == proc)
        for rnd in shown_rounds(psub.get_column("round").to_list()):
            at = {r["layer"]: r for r in psub.filter(pl.col("round") == rnd)
                  .iter_rows(named=True)}
            name = f"{proc} · round {rnd}"
            colour = COLOURS[series % len(COLOURS)]
            series += 1
            ys, texts, bad_x, bad_text = [], [], [], []
            for layer in order:
                r = at.get(layer)
                ok = r is not None and not r["top_differ"] and finite(r["err"]) and r["err"] > 0
                ys.append(r["err"] if ok else None)
                texts.append(f"{r['worst']}" if ok else "")
                if r is not None and r["differ"]:
                    bad_x.append(layer)
                    bad_text.append(f"{layer}: {DIFFER} from golden in {r['differ']} of "
                                    f"{r['outputs']} output tensors; first {r['first']}")
            traces.append({"type": "scatter", "mode": "lines+markers", "name": name,
                           "legendgroup": name, "x": order, "y": ys, "text": texts,
                           "line": {"color": colour, "width": 1.5}, "marker": {"size": 5},
                           "connectgaps": False,
                           "hovertemplate": "%{x}: rel. error %{y:.3g} (%{text})"})
            if bad_x:
                traces.append(_flag_trace(f"{name}: {DIFFER}", bad_x, bad_text, row, colour,
                                          fill=DIFFER_COLOUR, legend=True))
                row += 1
    return {"data": traces, "layout": {
        "title": title("Relative error at each layer's output (RMSE / RMS golden) per round; "
                       "✕ at the top: the NaN/Inf pattern differs from golden there"),
        "xaxis": layer_axis(order),
        "yaxis": log_axis("relative error at the layer's output", _ys(traces), band=True),
        "yaxis2": overlay_axis(), "shapes": _band(traces), "hovermode": "closest",
        "height": 480,
        "legend": _legend()}}


def per_layer_compare(checked: pl.DataFrame) -> pl.DataFrame:
    """Per device and layer of the checked pairs: pairs, failed, pairs whose
    NaN/Inf pattern differs from golden, and the lowest cosine and largest
    relative error of the pairs whose pattern agrees (the metrics cover finite
    elements only, so a differing pair would read as agreeing)."""
    agree = ~_differ()
    return (checked.with_columns(pl.col("target_process").str.split("_").list.first()
                                 .cast(pl.Int64, strict=False).alias("device"),
                                 pl.col("op").str.split("/").list.first().alias("layer"))
            .group_by(["device", "layer"])
            .agg(pl.len().alias("pairs"), (pl.col("verdict") != "pass").sum().alias("failed"),
                 _differ().sum().alias("differ"),
                 pl.col("cosine").filter(agree & pl.col("cosine").is_finite()).min()
                 .alias("min_cosine"),
                 pl.col("max_rel_err").filter(agree & pl.col("max_rel_err").is_finite()).max()
                 .alias("max_rel_err")))


def _cosine_axis(values: list) -> dict:
    """Cosine lies in [-1, 1]: the axis shows 1 (below the ✕ band) and at least
    down to 0.9."""
    lo = min([0.9, *(v for v in values if finite(v))])
    bottom = max(-1.05, lo - 0.04 * (1 - lo))
    return {"title": {"text": "lowest cosine (pairs whose NaN/Inf agree)"},
            "range": [bottom, top_of(bottom, 1.0, True)]}


def layer_compare_figure(per: pl.DataFrame, order: list[str]) -> dict:
    """Per layer and device: the lowest cosine and the largest relative error of
    the pairs whose NaN/Inf pattern agrees; a layer holding a pair whose pattern
    differs is off both lines and marked ✕ in its own colour."""
    traces, rels = [], []
    for k, dev in enumerate(sorted(per.get_column("device").unique().to_list())):
        rows = {r["layer"]: r for r in per.filter(pl.col("device") == dev).iter_rows(named=True)}
        colour = COLOURS[k % len(COLOURS)]
        agree = [layer in rows and not rows[layer]["differ"] for layer in order]
        cos = [rows[layer]["min_cosine"] if ok else None for layer, ok in zip(order, agree)]
        rel = [rows[layer]["max_rel_err"] if ok else None for layer, ok in zip(order, agree)]
        rel = [r if finite(r) and r > 0 else None for r in rel]
        rels += rel
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"dev {dev}: cosine",
                       "x": order, "y": [c if finite(c) else None for c in cos],
                       "line": {"color": colour}, "connectgaps": False,
                       "hovertemplate": "%{x}: lowest cosine %{y:.6f}"})
        traces.append({"type": "scatter", "mode": "lines+markers", "yaxis": "y2",
                       "name": f"dev {dev}: max rel. error", "x": order, "y": rel,
                       "line": {"color": colour, "dash": "dot"}, "connectgaps": False,
                       "hovertemplate": "%{x}: max relative error %{y:.3g}"})
        bad = [layer for layer in order if layer in rows and rows[layer]["differ"]]
        if bad:
            flag = _flag_trace(f"dev {dev}: {DIFFER}", bad,
                               [f"{layer}: {DIFFER} from golden in {rows[layer]['differ']} of "
                                f"{rows[layer]['pairs']} pairs" for layer in bad], k, colour,
                               fill=DIFFER_COLOUR, legend=True)
            traces.append({**flag, "yaxis": "y3"})
    return {"data": traces, "layout": {
        "title": title("Per layer against golden: lowest cosine (solid), largest relative "
                       "error (dotted); ✕: NaN/Inf differ from golden, off both lines"),
        "xaxis": layer_axis(order), "yaxis": _cosine_axis(_ys(traces)),
        "yaxis2": log_axis("max relative error", rels, band=True, overlaying="y",
                           side="right"),
        "yaxis3": overlay_axis(), "shapes": _band(traces), "hovermode": "closest",
        "height": 480,
        "legend": {**_legend(), "x": 1.08}}}
