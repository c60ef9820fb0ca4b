"""Op names are text on the report page, never markup: a dump whose op names are
HTML, a script-comment opener and Plotly markup, rendered by real headless
Chromium, draws every plot and every section, has none of the elements its
names spell, and shows each name as written in the tables and the plots."""

from __future__ import annotations

import html
import json

import numpy as np
from offline_helpers import chromium, console, run_cli
from offline_synth import small_model

NAMES = {"Layer": "<!--<script>", "Norm": '<span style="font-size:90px;color:red">big',
         "Linear": "<a href=javascript:alert(1)>link",
         "Add": "<b>%{x}&amp;<img src=x onerror=alert(1)>"}
SECTIONS = ("summary", "first-nan", "layers", "nan-map", "error-growth", "layer-compare",
            "compare-table")
# Runs after report.js has drawn the plots; a page cut short by a name never runs it.
# It hovers every point of every line and bar trace (Plotly throttles hovers to one
# per 50 ms), keeping what each hover label shows and any markup in it.
CHECK = """<script>document.addEventListener('DOMContentLoaded', function () {
  var all = function (q, el) {
    return Array.prototype.slice.call((el || document).querySelectorAll(q)); };
  var styled = function (el) { return all('tspan[style]', el).filter(function (t) {
    return /90px|red|bold/.test(t.getAttribute('style')); }).length; };
  var points = [], hovers = [], hoverMarkup = 0;
  function hoverNext() {
    if (!points.length) { return finish(); }
    var p = points.shift();
    Plotly.Fx.hover(p[0], [{curveNumber: p[1], pointNumber: p[2]}]);
    all('.hoverlayer', p[0]).forEach(function (h) {
      hovers.push(h.textContent);
      hoverMarkup += styled(h) + all('a', h).length;
    });
    setTimeout(hoverNext, 60);
  }
  function finish() {
    document.body.dataset.check = JSON.stringify({
      divs: all('div.plot').length,
      sections: all('section').map(function (s) { return s.id; }),
      injected: all('img, [onerror], td b, span[style], svg a, a[href^="javascript"]').length,
      styled: styled(document),
      plotText: all('.js-plotly-plot').map(function (p) { return p.textContent; }).join(' '),
      hovers: hovers, hoverMarkup: hoverMarkup,
      cells: all('td').map(function (td) { return td.textContent; })});
  }
  setTimeout(function () {
    all('.js-plotly-plot').forEach(function (gd) {
      gd.data.forEach(function (t, c) {
        if (t.type !== 'heatmap') {
          (t.y || []).forEach(function (y, i) { if (y !== null) { points.push([gd, c, i]); } });
        }
      });
    });
    hoverNext();
  }, 1000);
});</script>"""


def test_op_names_are_text_in_real_chromium(tmp_path):
    with np.errstate(all="ignore"):
        golden = small_model(tmp_path / "golden", names=NAMES)
        target = small_model(tmp_path / "target", dtype=np.float16, inject=(1, "Linear"),
                             pid=99, names=NAMES)
    out = tmp_path / "report.html"
    rc, text = run_cli("report", str(target), "--golden", str(golden), "-o", str(out), "--json")
    assert rc == 0, text
    info = json.loads(text)
    page = tmp_path / "checked.html"
    page.write_text(out.read_text().replace("</body>", CHECK + "</body>"))
    r = chromium(tmp_path, "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert console(r) == [], "the page logged to the console"
    dom = r.stdout
    assert 'data-check="' in dom, "the page was cut short: the check after it never ran"
    check = json.loads(html.unescape(dom.split('data-check="')[1].split('"')[0]))
    assert f'data-plots="{info["plots"]}"' in dom and 'data-plot-errors="0"' in dom
    assert check["divs"] == info["plots"] >= 6
    assert all(s in check["sections"] for s in SECTIONS), check["sections"]
    assert check["injected"] == 0 and check["styled"] == 0
    for name in NAMES.values():
        assert any(name in c for c in check["cells"]), f"{name!r} is not in any table"
    # hovers show names as written (layers everywhere, the bad op in its histogram)
    assert len(check["hovers"]) > 20 and check["hoverMarkup"] == 0
    for name in (NAMES["Layer"], NAMES["Linear"]):
        assert any(name in h for h in check["hovers"]), f"{name!r} is in no hover label"
    # the layer names label the axes, the bad op's name the histogram's legend
    for name in (NAMES["Layer"], NAMES["Linear"]):
        assert name in check["plotText"], f"{name!r} is not shown as written in the plots"
