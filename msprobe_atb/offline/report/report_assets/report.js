// The report's behaviour: draws every plot from its JSON spec, makes tables
// sortable, and leaves a marker on <body> saying how many plots were drawn (the
// tests and a reader can tell a broken page from a finished one).
(function () {
  "use strict";
  function drawPlots() {
    var drawn = 0, failed = 0;
    document.querySelectorAll("script[type='application/json'][data-plot]").forEach(function (s) {
      var target = document.getElementById(s.dataset.plot);
      try {
        var fig = JSON.parse(s.textContent);
        Plotly.newPlot(target, fig.data, fig.layout, {responsive: true, displaylogo: false});
        drawn++;
      } catch (e) {
        failed++;
        target.textContent = "This plot could not be drawn: " + e;
      }
    });
    document.body.dataset.plots = String(drawn);
    document.body.dataset.plotErrors = String(failed);
  }
  function cellValue(td) {
    var v = td.dataset.v !== undefined ? td.dataset.v : td.textContent.trim();
    var n = parseFloat(v);
    return isNaN(n) && !/^[-+]?(inf|nan)$/i.test(v) ? v.toLowerCase()
      : (/^nan$/i.test(v) ? Infinity : (/^-inf$/i.test(v) ? -Infinity : (/inf$/i.test(v) ? Infinity : n)));
  }
  function makeSortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        heads.forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
          var r = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0)
            : (typeof x === "number" ? -1 : 1);
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("table.sortable").forEach(makeSortable);
    drawPlots();
  });
})();
