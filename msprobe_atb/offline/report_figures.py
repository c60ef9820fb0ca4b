"""The report's interactive plots, as Plotly figure specs (plain dicts that the
page hands to Plotly.newPlot). Layers are ordered by op id and every device has
its own traces; a non-finite point is never dropped: its line breaks there and a
marker along the top edge says what it was. Names from the dump go only into
data keys (x, text, name, ...; page_text.plot_json escapes those), never into a
title or hovertemplate (where Plotly reads markup); a hover without <extra>
shows its trace's name beside it."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import polars as pl

from .dtypes import is_float_name

MAX_ROUND_LINES = 8
FP16_MAX = 65504.0
BF16_MAX = 3.3895313892515355e38
FLOAT_DTYPES = {"float", "double"}
# Plotly's default colour cycle, so that a round keeps its colour on every plot.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
NONFINITE_Y = 0.97  # where non-finite markers sit, in the overlay axis' 0..1


def layer_key(name: str) -> tuple:
    """'12_Prefill_layer' sorts after '2_Prefill_layer': by the numeric op id first."""
    head, _, rest = name.partition("_")
    return (int(head), rest) if head.isdigit() else (math.inf, name)


def is_float_dtype(dtype: str | None) -> bool:
    return bool(dtype) and (dtype in FLOAT_DTYPES or is_float_name(dtype))


def shown_rounds(rounds: Iterable[int]) -> list[int]:
    """At most MAX_ROUND_LINES rounds, spread evenly, first and last kept."""
    rs = sorted(set(rounds))
    if len(rs) <= MAX_ROUND_LINES:
        return rs
    return sorted({rs[int(i)] for i in np.linspace(0, len(rs) - 1, MAX_ROUND_LINES)})


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


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


def _overlay_axis() -> dict:
    return {"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True}


def _line_traces(per: pl.DataFrame, order: list[str], label: str, *, dash: str = "solid",
                 prefix: str = "", colour_of=None) -> list[dict]:
    """One line per (device, round) over the layers in `order`, broken at
    non-finite points, plus one marker trace of those points on the overlay axis."""
    traces: list[dict] = []
    for dev in sorted(per.get_column("device").unique().to_list()):
        dsub = per.filter(pl.col("device") == dev)
        for k, rnd in enumerate(shown_rounds(dsub.get_column("round").to_list())):
            rows = {r["layer"]: r for r in dsub.filter(pl.col("round") == rnd)
                    .iter_rows(named=True)}
            colour = (colour_of or (lambda d, i: COLOURS[i % len(COLOURS)]))(dev, k)
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
                traces.append({"type": "scatter", "mode": "markers", "yaxis": "y2",
                               "name": f"{name}: NaN/Inf", "legendgroup": name,
                               "showlegend": False, "x": bad_x,
                               "y": [NONFINITE_Y] * len(bad_x), "text": bad_text,
                               "hovertemplate": "%{text}",
                               "marker": {"symbol": "x", "size": 11, "color": "#c00",
                                          "line": {"width": 2, "color": colour}}})
    return traces


def _layer_axis(order: list[str]) -> dict:
    return {"type": "category", "categoryorder": "array", "categoryarray": order,
            "tickangle": -60, "automargin": True, "title": {"text": "layer (top-level op)"}}


def norm_figure(df: pl.DataFrame, golden: pl.DataFrame | None, order: list[str]) -> dict:
    traces = _line_traces(per_layer(df, "norm"), order, "norm")
    if golden is not None and golden.height:
        traces += _line_traces(per_layer(golden, "norm"), order, "norm", dash="dot",
                               prefix="golden ")
    return {"data": traces, "layout": {
        "title": {"text": "Largest L2 norm per layer" +
                  (" (dotted: golden)" if golden is not None else "") +
                  "; ✕ at the top: NaN/Inf there"},
        "xaxis": _layer_axis(order), "yaxis": {"type": "log", "title": {"text": "L2 norm"}},
        "yaxis2": _overlay_axis(), "hovermode": "closest", "height": 460,
        "legend": {"font": {"size": 10}}}}


def absmax_figure(df: pl.DataFrame, order: list[str]) -> dict:
    floats = df.filter(pl.col("dtype").map_elements(is_float_dtype, return_dtype=pl.Boolean))
    traces = _line_traces(per_layer(floats, "abs_max"), order, "|x| max")
    dtypes = set(floats.get_column("dtype").unique().to_list())
    limits = [("fp16 max 65504", FP16_MAX)]
    if "bf16" in dtypes:
        limits.append(("bf16 max 3.39e38", BF16_MAX))
    shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": v,
               "y1": v, "line": {"color": "#c00", "dash": "dash", "width": 1}}
              for _, v in limits]
    notes = [{"xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": math.log10(v),
              "text": t, "showarrow": False, "font": {"color": "#c00", "size": 10},
              "yanchor": "bottom"} for t, v in limits]
    return {"data": traces, "layout": {
        "title": {"text": "Largest |value| per layer, float tensors only; dashed: dtype limits"},
        "xaxis": _layer_axis(order), "yaxis": {"type": "log", "title": {"text": "max |x|"}},
        "yaxis2": _overlay_axis(), "shapes": shapes, "annotations": notes,
        "hovermode": "closest", "height": 460, "legend": {"font": {"size": 10}}}}


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
                               "hovertemplate": "round %{y}, %{x}: %{z} tensor(s) NaN/Inf"
                                                "<extra></extra>"}],
                     "layout": {"title": {"text": f"Tensors holding NaN/Inf, device {dev}"},
                                "xaxis": _layer_axis(order),
                                "yaxis": {"title": {"text": "round"}, "type": "category"},
                                "height": min(700, 220 + 22 * len(rounds))}})
    return figs


def histogram_figure(tensors: list[tuple[str, np.ndarray]], bins: int = 60) -> dict:
    """Histograms of the finite values of each (label, values); the non-finite
    counts are in each trace's name, so nothing is silently left out."""
    traces = []
    for label, values in tensors:
        v = np.asarray(values).ravel()
        if v.dtype.kind == "c":
            v = np.abs(v)
        v = v.astype(np.float64, copy=False)
        finite = v[np.isfinite(v)]
        counts = (f"NaN {int(np.isnan(v).sum())}, +Inf {int(np.isposinf(v).sum())}, "
                  f"-Inf {int(np.isneginf(v).sum())}")
        if finite.size:
            hist, edges = np.histogram(finite, bins=bins)
            centres = ((edges[:-1] + edges[1:]) / 2).tolist()
            width = float(edges[1] - edges[0]) if len(edges) > 1 else 1.0
        else:
            hist, centres, width = np.array([]), [], 1.0
        traces.append({"type": "bar", "name": f"{label} ({counts})", "x": centres,
                       "y": hist.tolist(), "width": width, "opacity": 0.6,
                       "hovertemplate": "%{x:.4g}: %{y} values"})
    return {"data": traces, "layout": {
        "title": {"text": "Values of the first NaN/Inf tensor and of its op's inputs "
                  "(finite values; the legend counts the others)"},
        "barmode": "overlay", "yaxis": {"type": "log", "title": {"text": "values"}},
        "xaxis": {"title": {"text": "value"}}, "height": 420,
        "legend": {"font": {"size": 10}}}}


def error_growth_figure(rows: pl.DataFrame) -> dict:
    """Relative error of every output tensor in target execution order, one line
    per (target process, round), with the layers named along the x axis."""
    traces, tickvals, ticktext = [], [], []
    procs = sorted(rows.get_column("target_process").unique().to_list())
    for p_i, proc in enumerate(procs):
        psub = rows.filter(pl.col("target_process") == proc)
        for k, rnd in enumerate(shown_rounds(psub.get_column("round").to_list())):
            sub = psub.filter(pl.col("round") == rnd).sort("target_seq")
            layers = [op.split("/", 1)[0] for op in sub.get_column("op").to_list()]
            if p_i == 0 and k == 0:
                for i, layer in enumerate(layers):
                    if i == 0 or layer != layers[i - 1]:
                        tickvals.append(i)
                        ticktext.append(layer)
            name = f"{proc} · round {rnd}"
            err = sub.get_column("rel_rmse").to_list()
            ok = sub.get_column("nonfinite_match").to_list()
            labels = [f"{o} {io}{ix}" for o, io, ix in
                      zip(sub.get_column("op"), sub.get_column("io"), sub.get_column("index"))]
            ys = [e if m is not False and _finite(e) and e > 0 else None for e, m in zip(err, ok)]
            colour = COLOURS[(p_i * MAX_ROUND_LINES + k) % len(COLOURS)]
            traces.append({"type": "scatter", "mode": "lines", "name": name, "legendgroup": name,
                           "x": list(range(len(ys))), "y": ys, "text": labels,
                           "line": {"color": colour, "width": 1.2}, "connectgaps": False,
                           "hovertemplate": "%{text}<br>rel. error %{y:.3g}"})
            bad = [i for i, m in enumerate(ok) if m is False]
            if bad:
                traces.append({"type": "scatter", "mode": "markers", "yaxis": "y2",
                               "legendgroup": name, "showlegend": False, "x": bad,
                               "y": [NONFINITE_Y] * len(bad),
                               "text": [f"{labels[i]}: NaN/Inf pattern differs" for i in bad],
                               "hovertemplate": "%{text}<extra></extra>",
                               "marker": {"symbol": "x", "size": 10, "color": colour}})
    return {"data": traces, "layout": {
        "title": {"text": "Error growth along the layers (✕ at the top: the NaN/Inf "
                  "pattern differs from golden)"},
        "xaxis": {"tickvals": tickvals, "ticktext": ticktext, "tickangle": -60,
                  "automargin": True, "title": {"text": "output tensors in execution order, "
                                                "by layer"}},
        "yaxis": {"type": "log", "title": {"text": "relative error (RMSE / RMS golden)"}},
        "yaxis2": _overlay_axis(), "hovermode": "closest", "height": 440,
        "legend": {"font": {"size": 10}}}}


def layer_compare_figure(per: pl.DataFrame, order: list[str]) -> dict:
    """Per layer and device: the lowest cosine and the largest relative error."""
    traces = []
    for k, dev in enumerate(sorted(per.get_column("device").unique().to_list())):
        rows = {r["layer"]: r for r in per.filter(pl.col("device") == dev).iter_rows(named=True)}
        colour = COLOURS[k % len(COLOURS)]
        cos = [rows[layer]["min_cosine"] if layer in rows else None for layer in order]
        rel = [rows[layer]["max_rel_err"] if layer in rows else None for layer in order]
        traces.append({"type": "scatter", "mode": "lines+markers", "name": f"dev {dev}: cosine",
                       "x": order, "y": [c if _finite(c) else None for c in cos],
                       "line": {"color": colour},
                       "hovertemplate": "%{x}: lowest cosine %{y:.6f}<extra></extra>"})
        traces.append({"type": "scatter", "mode": "lines+markers", "yaxis": "y2",
                       "name": f"dev {dev}: max rel. error", "x": order,
                       "y": [r if _finite(r) and r > 0 else None for r in rel],
                       "line": {"color": colour, "dash": "dot"},
                       "hovertemplate": "%{x}: max relative error %{y:.3g}<extra></extra>"})
    return {"data": traces, "layout": {
        "title": {"text": "Per layer against golden: lowest cosine (solid) and largest "
                  "relative error (dotted)"},
        "xaxis": _layer_axis(order), "yaxis": {"title": {"text": "lowest cosine"}},
        "yaxis2": {"title": {"text": "max relative error"}, "overlaying": "y", "side": "right",
                   "type": "log"},
        "hovermode": "closest", "height": 440, "legend": {"font": {"size": 10}}}}
