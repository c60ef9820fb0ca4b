"""The report's plots tell the truth: these tests read the figures the page
draws (the JSON embedded in it, and what real headless Chromium renders from
it) on dumps with a known injected fault, and hold them against what the dumps
hold, read independently of the report's code (statistic tables joined by hand,
the .bin files). Dumps: offline_helpers.TRUTH_* (an Inf in layer TRUTH_LAYER's
SwiGLU output at prefill round 0 on device 1 of 2; fp32 golden, fp16 target; two
requests, so prefill rounds 0-1 and decode rounds 0-3)."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from offline_helpers import TRUTH_LAYER, chromium, console, run_cli
from offline_synth import RoundWriter

from msprobe_atb.offline import load_bin, open_dump

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

INJECTED_LAYER = f"{TRUTH_LAYER + 1}_Prefill_layer"
PER_LAYER = ("layers", "nan-map", "error-growth", "layer-compare")
WINDOWS = (1300, 1400)
# Runs after report.js has drawn the plots: per plot, each visible axis' type and
# rendered tick labels with their boxes, and the title's box; per table, its
# width against its box's, and the width of its op column.
PROBE = """<script>document.addEventListener('DOMContentLoaded', function () {
  setTimeout(function () {
    var all = function (root, q) { return Array.prototype.slice.call(root.querySelectorAll(q)); };
    var box = function (e) { var r = e.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom]; };
    var plots = all(document, 'div.plot').map(function (gd) {
      var axes = {};
      Object.keys(gd._fullLayout).filter(function (k) { return /^[xy]axis\\d*$/.test(k); })
        .forEach(function (k) {
          var ax = gd._fullLayout[k];
          if (!ax.visible) return;
          axes[k] = {type: ax.type, ticks: all(gd, 'g.' + ax._id + 'tick text').map(
            function (t) { return [t.textContent, box(t)]; })};
        });
      var t = gd.querySelector('.gtitle');
      return {id: gd.id, axes: axes, title: t ? box(t) : null};
    });
    var tables = all(document, 'section').map(function (s) {
      var t = s.querySelector('table'), sc = s.querySelector('.scroll');
      if (!t) return null;
      var heads = all(t, 'thead th').map(function (th) { return th.textContent.trim(); });
      var op = heads.indexOf('op');
      return {id: s.id, width: t.scrollWidth, room: (sc || s).clientWidth,
              op: op < 0 ? null : all(t, 'thead th')[op].getBoundingClientRect().width};
    }).filter(Boolean);
    document.body.dataset.probe = JSON.stringify({plots: plots, tables: tables});
  }, 3000);
});</script>"""


def _figures(page: str) -> dict[str, list[dict]]:
    """Section id -> the figure specs embedded in it, in page order."""
    out: dict[str, list[dict]] = {}
    for sid, body in re.findall(r"<section id='([^']+)'>(.*?)</section>", page, re.S):
        out[sid] = [json.loads(s) for s in re.findall(
            r"<script type='application/json' data-plot='[^']+'>(.*?)</script>", body, re.S)]
    return out


def _rendered(tmp_path: Path, page: Path, width: int) -> dict:
    probed = tmp_path / f"probed-{width}.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    r = chromium(tmp_path, f"--window-size={width},1000", "--dump-dom", probed.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert console(r) == [], "the page logged to the console"
    assert 'data-plot-errors="0"' in r.stdout
    return json.loads(html.unescape(r.stdout.split('data-probe="')[1].split('"')[0]))


@pytest.fixture(scope="module")
def report(truth_dumps, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth-report")
    out = tmp / "report.html"
    rc, text = run_cli("report", str(truth_dumps["target"]), "--golden",
                       str(truth_dumps["golden"]), "-o", str(out), "--json")
    assert rc == 0, text
    rendered: dict[int, dict] = {}

    def render(width: int) -> dict:
        if width not in rendered:
            rendered[width] = _rendered(tmp, out, width)
        return rendered[width]

    return {"path": out, "page": out.read_text(), "info": json.loads(text), "render": render,
            "figures": _figures(out.read_text())}


def _is_decade(label: str) -> bool:
    try:
        v = float(label)
    except ValueError:
        return False
    return v > 0 and math.log10(v) == round(math.log10(v))


def _flags(fig: dict) -> dict[str, list[str]]:
    """✕ marker traces (on an overlay axis) -> the layers they mark, by trace name."""
    return {t["name"]: t["x"] for t in fig["data"]
            if t.get("mode") == "markers" and t.get("yaxis") in ("y2", "y3")
            and t["marker"].get("symbol") == "x"}


def _lines(fig: dict) -> list[dict]:
    return [t for t in fig["data"] if "lines" in t.get("mode", "")]


def _drawn(trace: dict) -> dict[str, float]:
    return {x: y for x, y in zip(trace["x"], trace["y"]) if y is not None}


def _truth(truth_dumps) -> dict:
    """From the dumps alone: per (device, round), the layers it ran, and the
    (device, round, layer)s where a target tensor holds +Inf where the golden
    tensor at the same op, io and index does not."""
    keys = ["device", "round", "op_id", "io", "index"]
    t = open_dump(truth_dumps["target"]).tensors.filter(pl.col("primary"))
    g = open_dump(truth_dumps["golden"]).tensors.filter(pl.col("primary"))
    j = t.select(*keys, "layer", "pinf").join(g.select(*keys, pl.col("pinf").alias("g_pinf")),
                                              on=keys, how="inner")
    inf = j.filter((pl.col("pinf") > 0) & (pl.col("g_pinf") == 0))
    ran = {}
    for dev, rnd, layer in t.select("device", "round", "layer").unique().iter_rows():
        ran.setdefault((dev, rnd), set()).add(layer)
    return {"ran": ran,
            "inf": set(inf.select("device", "round", "layer").unique().iter_rows())}


def test_every_per_layer_figure_flags_the_injected_layer_first(report, truth_dumps):
    figures = report["figures"]
    order = figures["layers"][0]["layout"]["xaxis"]["categoryarray"]
    for sid in PER_LAYER:
        for fig in figures[sid]:
            if fig["data"][0]["type"] == "heatmap":
                (hm,) = fig["data"]
                first = next(hm["x"][i] for i, v in enumerate(hm["z"][0]) if v)
                assert hm["y"][0] == "0" and first == INJECTED_LAYER, sid
                continue
            flags = _flags(fig)
            dev1 = [layers for name, layers in flags.items()
                    if (" 1_" in f" {name}" or "dev 1" in name) and "golden" not in name]
            assert dev1, f"{sid}: device 1's NaN/Inf are not marked: {list(flags)}"
            firsts = [min(layers, key=order.index) for layers in dev1]
            assert min(firsts, key=order.index) == INJECTED_LAYER, (sid, firsts)
            dev0 = [name for name in flags if name.startswith(("dev 0", "0_"))]
            assert dev0 == [], f"{sid}: device 0 ran clean, yet {dev0} are marked"


def test_no_layer_holding_inf_where_golden_does_not_is_drawn_as_agreeing(report, truth_dumps):
    truth = _truth(truth_dumps)
    assert (1, 0, INJECTED_LAYER) in truth["inf"] and not any(d == 0 for d, _, _ in
                                                              truth["inf"])
    (cmp_fig,) = report["figures"]["layer-compare"]
    flags = _flags(cmp_fig)
    cosine = next(t for t in cmp_fig["data"] if t["name"] == "dev 1: cosine")
    rel = next(t for t in cmp_fig["data"] if t["name"] == "dev 1: max rel. error")
    for _, _, layer in truth["inf"]:
        assert layer in flags["dev 1: NaN/Inf differ"], layer
        assert layer not in _drawn(cosine) and layer not in _drawn(rel), layer
    (growth,) = report["figures"]["error-growth"]
    gflags = _flags(growth)
    for dev, rnd, layer in truth["inf"]:
        marked = [x for name, xs in gflags.items() if name.startswith(f"{dev}_")
                  and f"round {rnd}:" in name for x in xs]
        assert layer in marked, (dev, rnd, layer)
    nflags = _flags(report["figures"]["layers"][0])
    for dev, rnd, layer in truth["inf"]:
        marked = [x for name, xs in nflags.items() if name.startswith(f"dev {dev} ·")
                  and f"round {rnd}:" in name for x in xs]
        assert layer in marked, (dev, rnd, layer)


def test_a_round_is_drawn_only_at_the_layers_it_ran(report, truth_dumps):
    """Decode rounds 2-3 ran decode layers only: no point of theirs is on a
    prefill layer; every point of every line is at a layer its round ran, and
    its hover names an op of that layer."""
    ran = _truth(truth_dumps)["ran"]
    assert not any("Prefill" in layer for layer in ran[(1, 3)])
    checked = 0
    for sid in ("layers", "error-growth"):
        for fig in report["figures"][sid]:
            for trace in _lines(fig):
                name = trace["name"]
                if name.startswith("golden"):
                    continue
                m = re.search(r"(?:dev (\d+)|^(\d+)_\d+) · .*round (\d+)$", name)
                dev, rnd = int(m.group(1) or m.group(2)), int(m.group(3))
                for i, (x, y) in enumerate(zip(trace["x"], trace["y"])):
                    if y is None:
                        continue
                    assert x in ran[(dev, rnd)], f"{sid}: {name} drawn at {x}"
                    if trace.get("text"):
                        assert trace["text"][i].split("/")[0] == x, (name, x, trace["text"][i])
                    checked += 1
    assert checked > 50


FLOAT_DTYPES = {"float", "double", "float16", "bf16"}


def layer_table(page: str) -> dict[str, list[str]]:
    """The per-layer table under the norm plot: layer -> its cells as shown."""
    body = page.split("<section id='layers'>")[1].split("</section>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", body.split("<tbody>")[1], re.S)
    cells = [[html.unescape(re.sub("<[^>]+>", "", c))
              for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)] for r in rows]
    return {c[0]: c[1:] for c in cells}


def test_the_norm_plot_is_the_layer_tables_over_float_tensors(report, truth_dumps):
    # it drew the token ids' norm (int64) over layer 0, above its float tensors'
    t = open_dump(truth_dumps["target"]).tensors.filter(pl.col("primary"))
    floats = t.filter(pl.col("dtype").is_in(FLOAT_DTYPES))
    files = dict(floats.group_by("layer").agg(pl.col("norm").max()).iter_rows())
    ints = dict(t.filter(~pl.col("dtype").is_in(FLOAT_DTYPES)).group_by("layer")
                .agg(pl.col("norm").max()).iter_rows())
    assert any(ints[x] > files[x] for x in ints), "no layer where an integer tensor bites"
    bad = set(t.filter(pl.col("nonfinite")).get_column("layer").to_list())
    drawn: dict[str, float] = {}
    for trace in _lines(report["figures"]["layers"][0]):
        assert not trace["name"].startswith("golden") or trace["line"]["dash"] == "dot"
        if trace["line"]["dash"] == "solid":
            for x, y in _drawn(trace).items():
                drawn[x] = max(drawn.get(x, 0.0), y)
    table = layer_table(report["page"])
    assert set(drawn) == set(files)
    for layer in set(files) - bad:  # the table says inf or nan where any tensor is
        assert f"{drawn[layer]:.6g}" == table[layer][0] == f"{files[layer]:.6g}", layer


def test_every_log_axis_is_labelled_at_powers_of_ten(report):
    logs = 0
    for figs in report["figures"].values():
        for fig in figs:
            for k, ax in fig["layout"].items():
                if k.startswith(("xaxis", "yaxis")) and ax.get("type") == "log":
                    logs += 1
                    assert ax["ticktext"] and all(_is_decade(t) for t in ax["ticktext"]), k
    assert logs >= 5
    for width in WINDOWS:
        seen = 0
        for plot in report["render"](width)["plots"]:
            for ax in plot["axes"].values():
                if ax["type"] == "log":
                    labels = [t for t, _ in ax["ticks"]]
                    assert labels and all(_is_decade(t) for t in labels), (plot["id"], labels)
                    seen += 1
        assert seen == logs


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def test_rendered_labels_do_not_collide_and_tables_fit(report):
    for width in WINDOWS:
        probe = report["render"](width)
        for plot in probe["plots"]:
            boxes = [(name, t, b) for name, ax in plot["axes"].items() for t, b in ax["ticks"]]
            for name, ax in plot["axes"].items():
                ticks = ax["ticks"]
                for (t1, b1), (t2, b2) in zip(ticks, ticks[1:]):
                    assert not _overlap(b1, b2), f"{plot['id']} {name}: {t1!r} overlaps {t2!r}"
            if plot["title"]:
                hit = [t for _, t, b in boxes if _overlap(plot["title"], b)]
                assert hit == [], f"{plot['id']}: the title collides with ticks {hit}"
        for table in probe["tables"]:
            assert table["width"] <= table["room"], f"{table['id']} is cut at {width} px"
        pairs = next(t for t in probe["tables"] if t["id"] == "compare-table")
        assert pairs["op"] >= 150, f"the op column is squeezed to {pairs['op']} px"


def test_the_headline_card_names_the_first_divergent_op_and_shows_its_values(report):
    page = report["page"]
    assert page.index("<section id='headline'>") < page.index("<section id='summary'>")
    card = page.split("<section id='headline'>")[1].split("</section>")[0]
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", card.replace("<wbr>", "")))
    assert facts["layer"] == INJECTED_LAYER and facts["round"] == "prefill round 0"
    assert facts["op"].startswith(INJECTED_LAYER + "/") and "SwiGlu" in facts["op"]
    assert facts["device"].startswith("1 (pid ") and facts["model"] == "DecoderModel_Prefill"
    assert facts["NaN/Inf in target"] == "1 +Inf" and facts["NaN/Inf in golden"] == "none"
    # NaN/Inf at different positions: msProbe's N/A, and the atol-floored relative error
    assert facts["cosine, max abs err, max rel err"] == "N/A (NaN/Inf at different positions)"
    fd = report["info"]["first_divergence"]
    golden = load_bin(fd["golden_path"]).ravel().astype(np.float64)
    target = load_bin(fd["target_path"]).ravel().astype(np.float64)
    ok = np.isfinite(golden) & np.isfinite(target)
    floored = np.abs(target - golden)[ok] / np.maximum(np.abs(golden[ok]), fd["atol"])
    shown = facts[f"max rel error, |t-g| / max(|g|, {fd['atol']:g}) (finite on both sides)"]
    assert float(shown) == pytest.approx(floored.max(), rel=1e-5)
    (fig,) = report["figures"]["headline"]
    points, _, cross = fig["data"]
    idx = points["customdata"]
    assert np.array_equal(points["x"], golden[idx]) and np.array_equal(points["y"], target[idx])
    bad = np.flatnonzero(np.isfinite(golden) != np.isfinite(target))
    assert len(cross["x"]) == bad.size == 1 and cross["x"][0] == golden[bad[0]]


def test_the_headline_relative_error_is_floored_where_golden_is_0(tmp_path):
    """Where golden is 0, msProbe's relative error is |t| / eps (1e5 for 0.01 in
    fp32): the card shows |t-g| / max(|g|, atol) instead, 0.01 / 1e-5 here."""
    golden = np.linspace(0, 1, 64).astype(np.float32)
    golden[:8] = 0
    for side in ("golden", "target"):
        w = RoundWriter(tmp_path / side / "atb_dump_data" / "data", "0_7", 0)
        w.add("1_Layer", "output", 0, golden if side == "golden" else
              np.where(golden == 0, np.float32(0.01), golden))
        w.close()
    out = tmp_path / "r.html"
    rc, _ = run_cli("report", str(tmp_path / "target"), "--golden", str(tmp_path / "golden"),
                    "-o", str(out))
    card = out.read_text().split("<section id='headline'>")[1].split("</section>")[0]
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd>([^<]*)</dd>", card.replace("<wbr>", "")))
    assert rc == 0 and facts["max rel error, |t-g| / max(|g|, 1e-05)"] == "1000", facts
    assert facts["max abs error"] == "0.01"


def test_the_pairs_table_says_matched_by_op_id_once(report):
    table = report["page"].split("<section id='compare-table'>")[1].split("</section>")[0]
    assert "matched by op id; golden name" not in table
    assert table.count("were matched by op id") == 1


def test_a_golden_with_another_layer_count_is_refused_with_a_clear_page(truth_dumps,
                                                                       tmp_path):
    out = tmp_path / "report.html"
    rc, text = run_cli("report", str(truth_dumps["target"]), "--golden",
                       str(truth_dumps["other_layers"]), "-o", str(out), "--json")
    assert rc == 3
    info = json.loads(text)
    assert info["refused"] and info["first_divergence"] is None
    page = out.read_text()
    figures = _figures(page)
    assert list(figures)[0] == "headline"
    card = page.split("<section id='headline'>")[1].split("</section>")[0]
    assert "Golden not compared" in card and "not built alike" in card
    assert "Prefill_layer" in card  # the layer counts that differ are named
    for sid in ("error-growth", "layer-compare", "compare-table"):
        assert sid not in figures
    assert not any(t["name"].startswith("golden") for f in figures["layers"] for t in f["data"])
    r = chromium(tmp_path, "--dump-dom", out.as_uri())
    assert console(r) == [] and 'data-plot-errors="0"' in r.stdout
