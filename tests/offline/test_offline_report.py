"""The HTML report, rendered by real headless Chromium: every section and plot
drawn, no console message, links that lead somewhere; and the plots' data:
non-finite points marked, float tensors only for |x|, devices split, layers in
op-id order."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from offline_helpers import chromium, console, run_cli

from msprobe_atb.offline.report import figures as figs

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

SECTIONS = ("summary", "first-nan", "layers", "nan-map", "error-growth", "layer-compare",
            "compare-table")
ASSETS = Path(figs.__file__).parent / "report_assets"


def _section(dom: str, sid: str) -> str:
    return dom.split(f'<section id="{sid}">')[1].split("</section>")[0]


def _check_report(tmp_path, dump, golden, injected_op: str) -> str:
    out = tmp_path / "report.html"
    rc, text = run_cli("report", str(dump), "--golden", str(golden), "-o", str(out), "--json")
    assert rc == 0 and out.exists()
    info = json.loads(text)
    assert info["report"] == str(out.resolve()) and info["plots"] >= 6
    assert info["first_nonfinite"][0]["op"] == injected_op
    r = chromium(tmp_path, "--dump-dom", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert console(r) == [], "the page logged to the console"
    dom = r.stdout
    for s in SECTIONS:
        assert f'<section id="{s}">' in dom, f"section {s} missing"
    assert f'data-plots="{info["plots"]}"' in dom and 'data-plot-errors="0"' in dom
    assert dom.count("js-plotly-plot") >= info["plots"]  # Plotly drew into every div
    assert injected_op in _section(dom, "first-nan")
    assert 'id="first-bad-histogram"' in dom
    assert "First divergent" in dom and injected_op in _section(dom, "error-growth")
    # self-contained: nothing is fetched
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", dom)
    # links: every in-page link has its target, every tensor link is a file that exists
    ids = set(re.findall(r' id="([^"]+)"', dom))
    for target in re.findall(r'href="#([^"]+)"', dom):
        assert target in ids, f"link to #{target} leads nowhere"
    files = re.findall(r'href="(file://[^"]+\.bin)"', _section(dom, "compare-table"))
    assert files and all(Path(f[len("file://"):]).exists() for f in files[:20])
    shot = tmp_path / "shot.png"
    r = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1300,4000", out.as_uri())
    assert r.returncode == 0 and shot.stat().st_size > 50_000
    return dom


def test_report_in_chromium_synthetic(tmp_path, synth_pair):
    _check_report(tmp_path, synth_pair[1], synth_pair[0], "2_Layer/1_Linear")


def test_report_in_chromium_real(tmp_path, real_dumps):
    from msprobe_atb.offline import open_dump
    from msprobe_atb.offline.stats.summary import first_nonfinite

    first = first_nonfinite(open_dump(real_dumps["injected"]).tensors)[0]
    dom = _check_report(tmp_path, real_dumps["injected"], real_dumps["golden"], first["op"])
    # rounds are named by model: the fault is in the first prefill, and the
    # dump's processes ran prefill and decode rounds
    assert "prefill round 0" in _section(dom, "first-nan")
    assert "First divergent: prefill round 0" in _section(dom, "error-growth")
    assert re.search(r"prefill round 0 \(1\); decode rounds? 0", _section(dom, "summary"))


def test_tables_sort_when_a_header_is_clicked(tmp_path):
    """report.js in real Chromium: a click on a header sorts numbers as numbers,
    with inf above every finite value."""
    page = tmp_path / "sort.html"
    page.write_text(
        "<html><body><table class='sortable'><thead><tr><th>op</th><th>err</th></tr></thead>"
        "<tbody><tr><td>a</td><td data-v='10'>10</td></tr><tr><td>b</td><td data-v='inf'>inf"
        "</td></tr><tr><td>c</td><td data-v='9'>9</td></tr></tbody></table>"
        f"<script>window.Plotly={{newPlot:function(){{}}}};</script>"
        f"<script>{(ASSETS / 'report.js').read_text()}</script>"
        "<script>document.addEventListener('DOMContentLoaded',function(){"
        "var th=document.querySelectorAll('th')[1];th.click();"
        "document.body.dataset.asc=[].map.call(document.querySelectorAll('tbody tr'),"
        "function(r){return r.cells[0].textContent}).join('');th.click();"
        "document.body.dataset.desc=[].map.call(document.querySelectorAll('tbody tr'),"
        "function(r){return r.cells[0].textContent}).join('');});</script></body></html>")
    r = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert 'data-asc="cab"' in r.stdout and 'data-desc="bac"' in r.stdout, r.stdout
    assert console(r) == []


def _frame(rows: list[dict]) -> pl.DataFrame:
    base = {"device": 0, "round": 0, "dtype": "float16", "nonfinite": False}
    return pl.DataFrame([{**base, **r} for r in rows])


def test_nonfinite_points_are_marked_never_skipped():
    df = _frame([{"layer": "1_L", "norm": 3.0, "abs_max": 1.0},
                 {"layer": "2_L", "norm": math.inf, "abs_max": math.inf, "nonfinite": True},
                 {"layer": "3_L", "norm": math.nan, "abs_max": 2.0, "nonfinite": True},
                 {"layer": "4_L", "norm": 5.0, "abs_max": 3.0}])
    order = ["1_L", "2_L", "3_L", "4_L"]
    fig = figs.norm_figure(df, None, order)
    line, marks = fig["data"]
    assert line["y"] == [3.0, None, None, 5.0] and line["connectgaps"] is False
    assert marks["yaxis"] == "y2" and marks["x"] == ["2_L", "3_L"]
    assert "inf" in marks["text"][0] and "nan" in marks["text"][1]


def test_absmax_shows_float_tensors_with_dtype_limits():
    df = _frame([{"layer": "1_L", "norm": 1.0, "abs_max": 2.0},
                 {"layer": "1_L", "norm": 1.0, "abs_max": 32000.0, "dtype": "int32"},
                 {"layer": "2_L", "norm": 1.0, "abs_max": 3.0, "dtype": "bf16"}])
    fig = figs.absmax_figure(df, ["1_L", "2_L"])
    assert fig["data"][0]["y"] == [2.0, 3.0]  # the int32 token ids are not there
    limits = sorted(s["y0"] for s in fig["layout"]["shapes"] if s["yref"] == "y")
    assert limits == [figs.FP16_MAX, figs.BF16_MAX]


def test_devices_split_and_layers_in_op_id_order():
    order = sorted(["12_Prefill_layer", "2_Prefill_layer", "0_WordEmbedding", "3_LmHead"],
                   key=figs.layer_key)
    assert order == ["0_WordEmbedding", "2_Prefill_layer", "3_LmHead", "12_Prefill_layer"]
    df = _frame([{"layer": "2_Prefill_layer", "norm": 1.0, "device": d, "abs_max": 1.0}
                 for d in (0, 1)])
    names = [t["name"] for t in figs.norm_figure(df, None, order)["data"]]
    assert names == ["dev 0 · round 0", "dev 1 · round 0"]


def test_an_all_finite_dump_draws_no_nan_map():
    df = _frame([{"layer": "1_L", "norm": 1.0, "abs_max": 1.0}])
    assert figs.nan_map_figures(df, ["1_L"]) == []
    bad = df.with_columns(pl.lit(True).alias("nonfinite"))
    assert len(figs.nan_map_figures(bad, ["1_L"])) == 1


def test_histogram_counts_what_it_cannot_draw():
    fig = figs.histogram_figure([("t", np.array([1.0, 2.0, np.nan, np.inf, -np.inf, np.inf]))])
    (trace,) = fig["data"]
    assert sum(c or 0 for c in trace["y"]) == 2 and "NaN 1, +Inf 2, -Inf 1" in trace["name"]


def test_progress_is_reported_per_step(synth_pair):
    from msprobe_atb.offline import open_dump
    from msprobe_atb.offline.report.page import REPORT_STEPS, build_report

    steps = []
    build_report(open_dump(synth_pair[1]), progress=lambda: steps.append(1))
    assert len(steps) == REPORT_STEPS


def test_a_log_axis_is_labelled_at_decades_only_even_for_one_value():
    from msprobe_atb.offline.report.axes import log_axis

    one = log_axis("norm", [25.667, 25.6673])  # a one-layer dump: not 25.667-25.6673
    assert one["ticktext"] == ["10", "100"] and one["range"][0] < 1 < 2 < one["range"][1]
    wide = log_axis("x", [1e-30, 3.0, 3.4e38])
    decades = [math.log10(v) for v in wide["tickvals"]]
    assert len(decades) <= 12 and all(d == round(d) for d in decades)
    assert wide["ticktext"][:2] == ["1e-30", "1e-24"] and "1" in wide["ticktext"]


def test_a_linear_axis_zoomed_into_a_tiny_span_says_so():
    from msprobe_atb.offline.report.axes import linear_axis

    assert "zoomed in" in linear_axis("value", [25.667, 25.6673])["title"]["text"]
    assert linear_axis("value", [-1.5, 1.7])["title"]["text"] == "value"
    fig = figs.histogram_figure([("t", np.full(100, 25.667) + np.linspace(0, 3e-4, 100))])
    assert "zoomed in" in fig["layout"]["xaxis"]["title"]["text"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "count"


def test_many_layers_are_labelled_sparsely_and_upright():
    from msprobe_atb.offline.report.axes import MAX_LAYER_TICKS, layer_axis

    order = [f"{i}_Decoder_layer" for i in range(166)]
    ax = layer_axis(order)
    assert len(ax["tickvals"]) <= MAX_LAYER_TICKS and ax["tickvals"][-1] == order[-1]
    assert ax["tickangle"] == -90 and ax["categoryarray"] == order


def test_histograms_of_several_tensors_share_their_bins():
    fig = figs.histogram_figure([("a", np.linspace(0, 1, 50)), ("b", np.linspace(5, 9, 50))])
    a, b = fig["data"]
    assert a["x"] == b["x"] and a["width"] == b["width"]


def test_a_first_divergence_is_the_earliest_across_devices():
    """Device 0 (listed first) fails at round 0 position 9, device 1 at round 0
    position 2: device 1's is the first divergent op."""
    from msprobe_atb.offline.compare.dumps import RESULT_COLUMNS, CompareResult, first_divergence

    def row(proc, seq, verdict, op):
        r = dict.fromkeys(RESULT_COLUMNS)
        r.update(verdict=verdict, primary=True, target_process=proc, round=0, target_seq=seq,
                 op=op)
        return r

    rows = [row("0_1", 100 + i, "fail" if i == 9 else "pass", f"d0 op{i}") for i in range(10)]
    rows += [row("1_2", 500 + i, "fail" if i >= 2 else "pass", f"d1 op{i}") for i in range(10)]
    res = CompareResult(pl.DataFrame(rows, infer_schema_length=None), [])
    assert first_divergence(res)["op"] == "d1 op2"
