"""`msprobe-atb report`: one self-contained HTML page (PNG plots inlined as base64)
with the dump's summary, norm and abs-max per layer across rounds, the NaN/Inf
map, and with a golden dump the error growth along the layers."""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import datetime, timezone

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from .compare import CompareResult, error_growth, first_divergence  # noqa: E402
from .summary import summarize  # noqa: E402
from .table import Dump  # noqa: E402

MAX_ROUND_LINES = 12

CSS = """body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;
font-size:90%;text-align:left}th{background:#eee}.bad{color:#b00;font-weight:bold}
img{max-width:100%;border:1px solid #ddd}code{background:#f4f4f4}"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _img(b64: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _table(headers: list[str], rows: list[list]) -> str:
    def cell(v):
        if isinstance(v, float):
            v = f"{v:.6g}"
        return f"<td>{html.escape('-' if v is None else str(v))}</td>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(v) for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def layer_round_stats(df: pl.DataFrame) -> tuple[list[str], pl.DataFrame]:
    """Layers in first-execution order, and per (layer, round): the largest norm,
    abs-max and the NaN/Inf tensor count."""
    df = df.filter(pl.col("primary"))
    order = (df.group_by("layer").agg(pl.col("seq").min().alias("s")).sort("s")
             .get_column("layer").to_list())
    per = df.group_by(["layer", "round"]).agg(
        pl.col("norm").fill_nan(None).max().alias("norm"),
        pl.col("abs_max").fill_nan(None).max().alias("abs_max"),
        pl.col("nonfinite").sum().alias("nonfinite"))
    return order, per


def _layer_plot(order: list[str], per: pl.DataFrame) -> str:
    rounds = sorted(per.get_column("round").unique().to_list())
    shown = rounds if len(rounds) <= MAX_ROUND_LINES else \
        [rounds[int(i)] for i in np.linspace(0, len(rounds) - 1, MAX_ROUND_LINES)]
    pos = {name: i for i, name in enumerate(order)}
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for ax, col, title in ((axes[0], "norm", "largest L2 norm"),
                           (axes[1], "abs_max", "largest |value|")):
        for r in shown:
            sub = per.filter(pl.col("round") == r)
            xs = [pos[n] for n in sub.get_column("layer")]
            ys = sub.get_column(col).to_list()
            pts = sorted((x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y)
                         and y > 0)
            if pts:
                ax.plot(*zip(*pts), marker=".", label=f"round {r}")
        ax.set_yscale("log")
        ax.set_ylabel(title)
        ax.grid(True, alpha=.3)
    axes[0].legend(fontsize=7, ncol=4)
    step = max(1, len(order) // 40)
    axes[1].set_xticks(range(0, len(order), step))
    axes[1].set_xticklabels(order[::step], rotation=70, fontsize=7)
    axes[0].set_title("Per layer (top-level op) across rounds; Inf/NaN points omitted")
    return _png(fig)


def _nan_map(order: list[str], per: pl.DataFrame) -> str:
    rounds = sorted(per.get_column("round").unique().to_list())
    grid = np.zeros((len(rounds), len(order)))
    ri = {r: i for i, r in enumerate(rounds)}
    li = {n: i for i, n in enumerate(order)}
    for r in per.iter_rows(named=True):
        grid[ri[r["round"]], li[r["layer"]]] = r["nonfinite"]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.25 * len(rounds)))
    im = ax.imshow(grid, aspect="auto", cmap="Reds", interpolation="nearest",
                   vmin=0, vmax=max(1.0, grid.max()))
    ax.set_yticks(range(len(rounds)))
    ax.set_yticklabels([str(r) for r in rounds], fontsize=7)
    step = max(1, len(order) // 40)
    ax.set_xticks(range(0, len(order), step))
    ax.set_xticklabels(order[::step], rotation=70, fontsize=7)
    ax.set_ylabel("round")
    ax.set_title("Tensors holding NaN/Inf, per layer and round")
    fig.colorbar(im, ax=ax, fraction=.02)
    return _png(fig)


def _error_plot(res: CompareResult) -> str:
    rows = res.rows.filter(pl.col("verdict").is_in(["pass", "fail"]) & pl.col("primary")
                           & (pl.col("io") == "output"))
    fig, ax = plt.subplots(figsize=(11, 4))
    rounds = sorted(rows.get_column("round").unique().to_list())[:MAX_ROUND_LINES]
    for r in rounds:
        sub = rows.filter(pl.col("round") == r).sort("target_seq")
        err = [math.inf if m is False else (e if e is not None else 0.0)
               for e, m in zip(sub.get_column("rel_rmse").to_list(),
                               sub.get_column("nonfinite_match").to_list())]
        xs = np.arange(len(err))
        finite = np.array([math.isfinite(e) for e in err])
        y = np.array([e if math.isfinite(e) else np.nan for e in err])
        line, = ax.plot(xs, np.maximum(y, 1e-12), lw=1, label=f"round {r}")
        if (~finite).any():  # drawn along the top edge, whatever the scale
            ax.plot(xs[~finite], np.full((~finite).sum(), 0.97), "x", color=line.get_color(),
                    transform=ax.get_xaxis_transform(), clip_on=False)
    ax.set_yscale("log")
    ax.set_xlabel("output tensors in target execution order")
    ax.set_ylabel("relative error (RMSE / RMS golden)")
    ax.set_title("Error growth along the layers (x at the top: NaN/Inf pattern differs)")
    ax.grid(True, alpha=.3)
    if rounds:
        ax.legend(fontsize=7, ncol=4)
    return _png(fig)


def build_report(dump: Dump, comparison: CompareResult | None = None,
                 golden_label: str | None = None) -> str:
    s = summarize(dump)
    df = dump.tensors
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>msprobe-atb report"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>msprobe-atb dump report</h1><p>Dump <code>{html.escape(s['dump'])}</code>, "
             f"{s['tensors']} tensors; generated "
             f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}.</p>",
             "<section id='summary'><h2>Summary</h2>",
             _table(["process", "device", "rounds", "layers", "ops", "tensors"],
                    [[p["dev_pid"], p["device"], len(p["rounds"]), p["layers"], p["ops"],
                      p["tensors"]] for p in s["processes"]])]
    if s["status"]:
        parts.append("<p>Files: " + html.escape(", ".join(f"{k} {v}" for k, v in
                                                          sorted(s["status"].items()))) + "</p>")
    if s["problems"]:
        parts.append("<p class='bad'>Problems:</p><ul>" + "".join(
            f"<li>{html.escape(p)}</li>" for p in s["problems"][:50]) + "</ul>")
    parts.append("</section>")

    parts.append("<section id='first-nan'><h2>First NaN/Inf</h2>")
    if not s["first_nonfinite"]:
        parts.append("<p>No tensor holds NaN or Inf.</p>")
    for f in s["first_nonfinite"]:
        parts.append(f"<p class='bad'>{html.escape(f['dev_pid'])} round {f['round']}: "
                     f"{html.escape(f['op'])} {f['io']} {html.escape(str(f['index']))} "
                     f"(nan {f['nan']}, +inf {f['pinf']}, -inf {f['ninf']})</p>")
        if f.get("upstream"):
            parts.append(_table(["fed by", "via tensor", "NaN/Inf", "zeros", "min", "max"],
                                [[u.get("op") or u["graph_name"], u["tensor"],
                                  u.get("nonfinite"), u.get("zero"), u.get("min"),
                                  u.get("max")] for u in f["upstream"]]))
    parts.append("</section>")

    if df.height:
        order, per = layer_round_stats(df)
        parts.append("<section id='layers'><h2>Norm and abs-max per layer across rounds</h2>"
                     + _img(_layer_plot(order, per), "norm and abs-max per layer") +
                     _table(["layer", "max norm", "at", "max |x|", "at", "NaN/Inf tensors"],
                            [[r["layer"], r["max_norm"], r["max_norm_at"], r["max_abs"],
                              r["max_abs_at"], r["nonfinite_tensors"]] for r in s["layers"]])
                     + "</section>")
        parts.append("<section id='nan-map'><h2>NaN/Inf map</h2>"
                     + _img(_nan_map(order, per), "NaN/Inf map") + "</section>")

    if comparison is not None:
        fd = first_divergence(comparison)
        counts = {v: comparison.count(v) for v in ("pass", "fail", "golden-only",
                                                     "target-only", "unreadable")}
        parts.append("<section id='error-growth'><h2>Comparison with golden "
                     f"<code>{html.escape(golden_label or '')}</code></h2><p>"
                     + html.escape(", ".join(f"{k} {v}" for k, v in counts.items())) + "</p>")
        if fd:
            parts.append(f"<p class='bad'>First divergent: round {fd['round']} "
                         f"{html.escape(fd['op'])} {fd['io']} {html.escape(str(fd['index']))}: "
                         f"{html.escape(fd['reason'] or '')}</p>")
        else:
            parts.append("<p>No divergent tensor.</p>")
        parts.append(_img(_error_plot(comparison), "error growth along the layers"))
        parts.append(_table(["round", "op", "input error", "output error", "growth"],
                            [[o["round"], o["op"], o["err_in"], o["err_out"], o["growth"]]
                             for o in error_growth(comparison, 10)]))
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
