"""`msprobe-atb report`: one self-contained HTML page that works offline, with
interactive plots (Plotly, inlined), sortable tables and links to the tensors:
the diagnosis's card first, with a golden the first divergent op's (headline.py);
the summary, the first NaN/Inf with the ops feeding it and a histogram of its values, norm and
abs-max per layer and device across rounds, the NaN/Inf map, and with a golden
the error growth along the layers, the per-layer comparison and the worst
tensor pairs. A golden built differently is not compared: the page says why.
The plots are figures.py, their axes axes.py."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import polars as pl

from msprobe_atb.tree.names import os_path

from ..compare.dumps import CompareResult, error_growth, first_divergence
from ..read.losses import format_losses
from ..read.table import Dump
from ..stats.summary import no_nonfinite_text, ranges_text, rounds_text, summarize
from . import figures as figs
from .headline import diagnosis_block, headline_blocks, load_tensors
from .page_text import plot_json
from .precision import bisect_result, precision_rows

MAX_COMPARE_ROWS = 300
REPORT_STEPS = 6  # the progress callback is called once per step


@dataclass(frozen=True)
class Link:
    text: str
    href: str


@dataclass
class Page:
    """The report's parts as they are built: sections in order, and the plots."""

    sections: list[tuple[str, str, str]] = field(default_factory=list)  # id, title, html
    plots: int = 0

    def plot(self, fig: dict, height: int | None = None) -> str:
        self.plots += 1
        pid = f"plot{self.plots}"
        spec = plot_json(fig)
        style = f" style='height:{height}px'" if height else ""
        return (f"<div class='plot' id='{pid}'{style}></div>"
                f"<script type='application/json' data-plot='{pid}'>{spec}</script>")


def _link(v: Link | str) -> str:
    return (f"<a href='{html.escape(v.href)}'>{html.escape(v.text)}</a>"
            if isinstance(v, Link) else html.escape(v))


WIDE = {"op": "op", "reason": "reason"}  # columns with a class (report.css: their width)


def _cell(v, header: str = "") -> str:
    if isinstance(v, (Link, list)):
        links = v if isinstance(v, list) else [v]
        return f"<td class='links'>{' '.join(_link(x) for x in links)}</td>"
    if header == "op":  # an op path may break after a '/', never inside a name
        return f"<td class='op'>{html.escape(figs.fmt_value(v)).replace('/', '/<wbr>')}</td>"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        cls = f" class='{WIDE[header]}'" if header in WIDE else ""
        return f"<td{cls}>{html.escape(figs.fmt_value(v))}</td>"
    text = html.escape(figs.fmt_value(v))
    return f"<td class='num' data-v='{text}'>{text}</td>"


def _table(headers: list[str], rows: list[list], ids: list[str] | None = None,
           scroll: bool = False) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        f"<tr{f' id={chr(39)}{ids[i]}{chr(39)}' if ids else ''}>"
        + "".join(_cell(v, h) for v, h in zip(r, headers)) + "</tr>"
        for i, r in enumerate(rows))
    t = f"<table class='sortable'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<div class='scroll'>{t}</div>" if scroll else t


def _file_link(path: str | None, text: str = ".bin") -> Link | str:
    return Link(text, Path(os_path(path)).as_uri()) if path and Path(path).is_absolute() \
        else "-"


def _cards(items: list[tuple[str, object, bool]]) -> str:
    return "<div class='cards'>" + "".join(
        f"<div class='card{' bad' if bad else ''}'><b>{html.escape(figs.fmt_value(v))}</b>"
        f"{html.escape(label)}</div>" for label, v, bad in items) + "</div>"


def _layer_order(*frames: pl.DataFrame) -> list[str]:
    names = set()
    for f in frames:
        names.update(f.get_column("layer").drop_nulls().unique().to_list())
    return sorted(names, key=figs.layer_key)


def _summary(page: Page, s: dict, comparison: CompareResult | None) -> None:
    cards = [("tensors", s["tensors"], False), ("processes", len(s["processes"]), False),
             ("tensors with NaN/Inf", s["nonfinite_tensors"], s["nonfinite_tensors"] > 0)]
    if comparison is not None:
        fails = comparison.count("fail")
        cards += [("pairs compared", comparison.count("pass") + fails, False),
                  ("pairs failed", fails, fails > 0)]
    body = [_cards(cards), _table(
        ["process", "device", "rounds", "layers", "ops", "tensors"],
        [[p["dev_pid"], p["device"], rounds_text(p), p["layers"], p["ops"],
          p["tensors"]] for p in s["processes"]])]
    if s["status"]:
        body.append("<p>Files: " + html.escape(", ".join(
            f"{k} {v}" for k, v in sorted(s["status"].items()))) + "</p>")
    # what the dump lost (a full disk, the drop policy): the plots cannot show it
    lost = format_losses(s, s["tensors"])
    if comparison is not None and comparison.scope.losses:
        lost = ["NOT A PASS: tensors the probe selected are missing from a dump, so they "
                "were not compared:", *comparison.scope.losses]
    if lost:
        body.append("<p class='bad'>" + "<br>".join(html.escape(x.strip()) for x in lost)
                    + "</p>")
    if s["problems"]:
        body.append("<p class='bad'>Problems:</p><ul>" + "".join(
            f"<li>{html.escape(p)}</li>" for p in s["problems"][:50]) + "</ul>")
    page.sections.append(("summary", "Summary", "".join(body)))


def _precision(page: Page, root: Path | None) -> str | None:
    """The bisect result beside the dump, if any; returns its file's name."""
    f, doc = bisect_result(root)
    if f is None:
        return None
    title = "Ops to keep in fp32 (bisect)"
    if isinstance(doc, str):
        page.sections.append(("precision", title, f"<p class='bad'>{html.escape(str(f))}: "
                              f"{html.escape(doc)}</p>"))
        return str(f)
    head, groups, chosen, ranking = precision_rows(doc)
    cols = ["op", "type", "error removed alone", "share"]
    body = [f"<p>{html.escape(head)} (<code>{html.escape(str(f))}</code>).</p>"]
    if groups:
        body.append("<p>By op type and layer: " + html.escape("; ".join(groups)) + "</p>")
    if chosen:
        body.append(_table(cols, chosen))
    if ranking:
        body += ["<p>Ranking: the error each op removes when promoted alone.</p>",
                 _table(cols, ranking, scroll=True)]
    page.sections.append(("precision", title, "".join(body)))
    return str(f)


def _incidents(page: Page, s: dict) -> None:
    """The flight recorder's incidents: what fired, on which rank and tensor, and
    links to the rounds it wrote."""
    rows, refused = [], []
    for d in s["incidents"]:
        if "error" in d:
            refused.append(f"{d['incident']}: {d['error']}")
            continue
        ft = d.get("first_tensor") or {}
        dirs = [Link(f"{f['dev_pid']}/{f['round']}", Path(os_path(f["dir"])).as_uri())
                for f in d.get("flushed") or [] if f.get("dir")]
        rows.append([d.get("incident"), d.get("trigger"), d.get("value"),
                     d.get("finding") or "-", d.get("time"),
                     d.get("round_label", d.get("round")), d.get("device"), d.get("pid"),
                     " ".join(str(ft.get(k)) for k in ("op_id", "op_name", "io", "index")
                              if ft.get(k) is not None) or "-",
                     d.get("rounds_written") or ranges_text(
                         [r for r in d.get("flushed_rounds") or [] if isinstance(r, int)])
                     or "none yet",
                     *(dirs[:1] or ["-"])])
    body = _table(["#", "trigger", "value", "found by", "time", "round", "device", "pid",
                   "first offending tensor", "rounds written", "first round dir"], rows)
    if refused:
        body += "<p class='bad'>Not read:</p><ul>" + "".join(
            f"<li>{html.escape(r)}</li>" for r in refused) + "</ul>"
    page.sections.append(("incidents", "Flight recorder incidents", body))


def _first_nan(page: Page, s: dict, df: pl.DataFrame) -> None:
    firsts = s["first_nonfinite"]
    if not firsts:
        page.sections.append(("first-nan", "First NaN/Inf", _clean_verdict(s)))
        return
    body = [_table(["process", "round", "op", "io", "index", "dtype", "NaN", "+Inf", "-Inf",
                    "tensor"],
                   [[f["dev_pid"], f["round_label"], f["op"], f["io"], f["index"], f["dtype"],
                     f["nan"], f["pinf"], f["ninf"], _file_link(f["path"])] for f in firsts])]
    first = firsts[0]
    body.append(f"<p class='bad'>First in execution order: {html.escape(first['dev_pid'])} "
                f"{first['round_label']}: {html.escape(first['op'])} {first['io']} "
                f"{html.escape(str(first['index']))}</p>")
    if first.get("upstream"):
        body.append("<p>The ops feeding it, with their latest output before it:</p>")
        body.append(_table(["fed by", "via tensor", "NaN/Inf", "zeros", "min", "max"],
                           [[u.get("op") or u["graph_name"], u["tensor"], u.get("nonfinite"),
                             u.get("zero"), u.get("min"), u.get("max")]
                            for u in first["upstream"]]))
    body.append(_histogram(page, first, df))
    page.sections.append(("first-nan", "First NaN/Inf", "".join(body)))


def _histogram(page: Page, first: dict, df: pl.DataFrame) -> str:
    """The values of the first bad tensor and of its op's inputs in that round."""
    inputs = df.filter((pl.col("dev_pid") == first["dev_pid"]) & (pl.col("round") ==
                       first["round"]) & (pl.col("op_id") == first["op_id"])
                       & (pl.col("io") == "input") & pl.col("primary")).sort("index")
    wanted = [(f"{first['op']} {first['io']}{first['index']}", first["path"])]
    if first["io"] != "input":
        wanted += [(f"input{r['index']}", r["path"]) for r in inputs.iter_rows(named=True)]
    loaded, note = load_tensors(wanted)
    parts = ["<h3 id='first-bad-histogram'>Histogram</h3>"]
    if loaded:
        parts.append(page.plot(figs.histogram_figure(list(loaded.items()))))
    return "".join([*parts, note])


def torch_aligned(df: pl.DataFrame, comparison: CompareResult | None) -> pl.DataFrame | None:
    """Against a torch golden: this dump's tensors that were paired with a torch
    tensor (the golden has no others); None for an ATB golden (it has them all)."""
    if comparison is None or comparison.torch_alignment is None:
        return None
    keys = ["round", "op_id", "stage", "io", "index"]
    paired = (comparison.rows.filter(pl.col("verdict").is_in(["pass", "fail"]))
              .select(pl.col("target_process").alias("dev_pid"), *keys).unique())
    return df.join(paired, on=["dev_pid", *keys], how="semi", nulls_equal=True)


def _layers(page: Page, df: pl.DataFrame, golden: pl.DataFrame | None, order: list[str],
            s: dict, aligned: pl.DataFrame | None) -> None:
    body = [page.plot(figs.norm_figure(df, golden, order, aligned)),
            page.plot(figs.absmax_figure(df, order)),
            _table(["layer", "max norm", "at", "max |x|", "at", "NaN/Inf tensors"],
                   [[r["layer"], r["max_norm"], r["max_norm_at"], r["max_abs"],
                     r["max_abs_at"], r["nonfinite_tensors"]]
                    for r in sorted(s["layers"], key=lambda r: figs.layer_key(r["layer"]))],
                   scroll=True)]
    page.sections.append(("layers", "Norm and abs-max per layer across rounds", "".join(body)))


def _clean_verdict(s: dict, checked: str = "") -> str:
    """No NaN/Inf, as `stats` says it (a dump that lost tensors is no all-clear)."""
    whole = not (s["lost"] or s["derived_behind"])
    return (f"<p class='{'ok' if whole else 'bad'}'>{html.escape(no_nonfinite_text(s))}"
            f"{checked}</p>")


def _nan_map(page: Page, s: dict, df: pl.DataFrame, order: list[str]) -> None:
    maps = figs.nan_map_figures(df, order)
    if not maps:
        rounds = df.get_column("round").n_unique()
        body = _clean_verdict(s, f" {len(order)} layers × {rounds} round(s) checked.")
    else:
        body = "".join(page.plot(f) for f in maps)
    page.sections.append(("nan-map", "NaN/Inf map", body))


RENAMED = "matched by op id; golden name "


def _compare_rows(comparison: CompareResult) -> tuple[pl.DataFrame, dict[str, str]]:
    """The worst pairs first (failed, then lowest cosine), each with a row id;
    and the id of the worst pair of each layer, for links from the layer table."""
    rows = (comparison.rows.with_row_index("_i")
            .with_columns(pl.col("op").str.split("/").list.first().alias("_layer"),
                          (pl.col("verdict") == "pass").alias("_passed"))
            .sort(["_passed", "cosine"], nulls_last=False))
    rows = rows.with_columns(pl.format("cmp-{}", pl.col("_i")).alias("_id"))
    worst = dict(rows.group_by("_layer", maintain_order=True).first()
                 .select("_layer", "_id").iter_rows())
    return rows, worst


def _reasons(shown: pl.DataFrame, golden: Dump | None) -> tuple[list[str], int]:
    """Each row's reason without compare's "matched by op id; golden name ..."
    (said once above the table), and on how many rows it was."""
    names: dict[tuple, str] = {}
    if golden is not None and golden.tensors.height:
        g = golden.tensors.select("dev_pid", "seq", "op_name").unique(["dev_pid", "seq"])
        names = {(p, q): n for p, q, n in g.iter_rows()}
    out, renamed = [], 0
    for r in shown.select("reason", "golden_process", "golden_seq").iter_rows():
        reason, key = r[0] or "", (r[1], r[2])
        said = RENAMED + names.get(key, "\0")
        if reason == said or reason.startswith(said + "; "):
            reason, renamed = reason[len(said) + 2:], renamed + 1
        out.append(reason)
    return out, renamed


def _growth(page: Page, comparison: CompareResult, label: str, order: list[str],
            checked: pl.DataFrame) -> None:
    counts = {v: comparison.count(v) for v in ("pass", "fail", "golden-only", "target-only",
                                               "unreadable")}
    fd = first_divergence(comparison)
    body = ["<p>Against golden <code>" + html.escape(label) + "</code>: "
            + html.escape(", ".join(f"{k} {v}" for k, v in counts.items())) + "</p>"]
    sc = comparison.scope
    for line in [*sc.structure, *sc.causes] if sc.incomplete else []:
        body.append(f"<p class='bad'>Not a pass: {html.escape(line)}</p>")
    if fd:
        body.append(f"<p class='bad'>First divergent: {comparison.round_label(fd)} "
                    f"{html.escape(fd['op'])} {fd['io']} {html.escape(str(fd['index']))}: "
                    f"{html.escape(fd['reason'] or '')}</p>")
    elif not sc.incomplete:
        body.append("<p class='ok'>No divergent tensor.</p>")
    outputs = checked.filter(pl.col("io") == "output")
    body.append(page.plot(figs.error_growth_figure(outputs, order)))
    body.append(_table(["round", "op", "input error", "output error", "growth"],
                       [[comparison.round_label(o), o["op"], o["err_in"], o["err_out"],
                         "from zero" if o["from_zero"] else o["growth"]]
                        for o in error_growth(comparison, 10)]))
    page.sections.append(("error-growth", "Error growth along the layers", "".join(body)))


def _comparison(page: Page, comparison: CompareResult, label: str, order: list[str],
                golden: Dump | None) -> None:
    rows, worst = _compare_rows(comparison)
    shown = rows.head(MAX_COMPARE_ROWS)
    listed = set(shown.get_column("_id").to_list())
    worst = {layer: rid for layer, rid in worst.items() if rid in listed}
    checked = rows.filter(pl.col("verdict").is_in(["pass", "fail"]) & pl.col("primary"))
    _growth(page, comparison, label, order, checked)

    per = figs.per_layer_compare(checked)
    lbody = [page.plot(figs.layer_compare_figure(per, order)), _table(
        ["layer", "device", "pairs", "failed", "NaN/Inf differ", "lowest cosine",
         "max rel. error", "worst pair"],
        [[r["layer"], r["device"], r["pairs"], r["failed"], r["differ"], r["min_cosine"],
          r["max_rel_err"], Link("show", f"#{worst[r['layer']]}") if r["layer"] in worst
          else "-"]
         for r in sorted(per.iter_rows(named=True),
                         key=lambda r: (figs.layer_key(r["layer"]), r["device"] or 0))],
        scroll=True),
        "<p class='muted'>Lowest cosine and max rel. error are over the pairs whose NaN/Inf "
        "agree with golden (their metrics cover the finite elements only).</p>"]
    page.sections.append(("layer-compare", "Per layer against golden", "".join(lbody)))

    reasons, renamed = _reasons(shown, golden)
    more = rows.height - shown.height
    table = _table(
        ["verdict", "process", "round", "op", "tensor", "cosine", "max abs err",
         "max rel err", "NaN/Inf golden", "NaN/Inf target", "reason", ".bin"],
        [[r["verdict"], r["target_process"], comparison.round_label(r), r["op"],
          f"{r['io']} {r['index']}",
          r["cosine"], r["max_abs_err"], r["max_rel_err"],
          _nonfinite(r, "golden"), _nonfinite(r, "target"), reason,
          [_file_link(r["golden_path"], "golden"), _file_link(r["target_path"], "target")]]
         for r, reason in zip(shown.iter_rows(named=True), reasons)],
        ids=shown.get_column("_id").to_list(), scroll=True)
    said = (f"<p class='muted'>{renamed} of these pairs were matched by op id: the golden "
            "op's name differs from the target's in its dtype tags only (kernel names carry "
            "the dtype, e.g. AddF32Kernel and AddF16Kernel). The golden names are in the "
            "CSV that <code>msprobe-atb compare</code> writes.</p>" if renamed else "")
    note = (f"<p class='muted'>The {shown.height} worst of {rows.height} pairs; the rest "
            "are in the CSV that <code>msprobe-atb compare</code> writes.</p>" if more else "")
    page.sections.append(("compare-table", "Tensor pairs, worst first", said + table + note))


def _nonfinite(r: dict, side: str) -> int | None:
    vals = [r.get(f"{side}_{k}") for k in ("nan", "pinf", "ninf")]
    return None if all(v is None for v in vals) else sum(v or 0 for v in vals)


def refusal(comparison: CompareResult | None) -> list[str]:
    """Why the golden dump is not compared in the report: golden and target are
    built differently (other layer counts or op names at the same ids), so
    pairing their tensors would compare different ops."""
    sc = comparison.scope if comparison is not None else None
    return list(sc.structure) if sc is not None and sc.structure and not sc.paired_by_id \
        else []


def _refused(page: Page, label: str, why: list[str]) -> None:
    page.sections.append(("headline", "Golden not compared", (
        f"<p class='bad'>The golden dump <code>{html.escape(label)}</code> was not compared "
        "with this dump: they are not built alike (different models?), so their tensors "
        "would pair different ops. <code>msprobe-atb compare --pair-by-id</code> pairs them "
        "by op id if you are sure.</p><ul>"
        + "".join(f"<li>{html.escape(w)}</li>" for w in why) + "</ul>"
        "<p>The rest of this page is about this dump alone.</p>")))


def _assets() -> tuple[str, str, str]:
    here = resources.files(__package__) / "report_assets"
    plotly_js = resources.files("plotly") / "package_data" / "plotly.min.js"
    return ((here / "report.css").read_text(encoding="utf-8"),
            (here / "report.js").read_text(encoding="utf-8"),
            plotly_js.read_text(encoding="utf-8"))


def build_report(dump: Dump, comparison: CompareResult | None = None,
                 golden_label: str | None = None, golden: Dump | None = None,
                 progress: Callable[[], object] | None = None) -> tuple[str, dict]:
    """The page, and a summary of it (sections, plots, findings) for --json."""
    step = progress or (lambda: None)
    s = summarize(dump)
    refused = refusal(comparison)
    page = Page()
    if refused:
        _refused(page, golden_label or "", refused)
        comparison = golden = None
    df = dump.tensors.filter(pl.col("primary")) if dump.tensors.height else dump.tensors
    gdf = golden.tensors.filter(pl.col("primary")) if golden is not None else None
    order = _layer_order(df, *([gdf] if gdf is not None else []))
    diagnosis = comparison.diagnosis if comparison is not None else s["diagnosis"]
    page.sections.append(("diagnosis", "Root cause", diagnosis_block(diagnosis)))
    if comparison is not None:
        page.sections.append(("headline", "First divergent op", "".join(
            headline_blocks(comparison, dump, page.plot))))
    _summary(page, s, comparison)
    if s["incidents"]:
        _incidents(page, s)
    bisect_file = _precision(page, dump.root)
    step()
    _first_nan(page, s, df)
    step()
    if df.height:
        _layers(page, df, gdf, order, s, torch_aligned(df, comparison))
        step()
        _nan_map(page, s, df, order)
    step()
    if comparison is not None:
        _comparison(page, comparison, golden_label or "", order, golden)
    step()
    css, js, plotly_js = _assets()
    nav = "".join(f"<a href='#{sid}'>{html.escape(title)}</a>"
                  for sid, title, _ in page.sections)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    doc = "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>msprobe-atb report</title>", f"<style>{css}</style>",
        f"<script>{plotly_js}</script>", f"<script>{js}</script></head><body>",
        f"<header><h1>msprobe-atb dump report</h1><p>Dump <code>{html.escape(s['dump'])}"
        f"</code>, {s['tensors']} tensors"
        + (f"; golden <code>{html.escape(golden_label)}</code>" if golden_label else "")
        + f"; generated {now}.</p></header>", f"<nav>{nav}</nav><main>",
        *(f"<section id='{sid}'><h2>{html.escape(title)}</h2>{body}</section>"
          for sid, title, body in page.sections),
        "</main></body></html>"])
    step()
    fd = first_divergence(comparison) if comparison is not None else None
    info = {"sections": [sid for sid, _, _ in page.sections], "plots": page.plots,
            "tensors": s["tensors"], "first_nonfinite": s["first_nonfinite"][:1],
            "first_divergence": fd, "diagnosis": diagnosis, "refused": refused, "lost": s["lost"],
            "params_lost": s["params_lost"], "derived_behind": s["derived_behind"],
            "derived_lag": s["derived_lag"], "bisect": bisect_file}
    return doc, info
