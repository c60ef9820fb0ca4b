"""Text from a dump (op names, layer names, process dirs, paths) on the report
page is text, never markup, wherever it goes:

* HTML: `html.escape` (tables, headings, attributes);
* JSON inside `<script>`: `plot_json()` writes `<`, `>`, `&` and the JS line
  separators as \\u escapes, so no name can end the script element or open a
  comment in it (`<!--<script>` did, and swallowed the rest of the page);
* Plotly: its labels, legends, tick labels and hovers render a pseudo-HTML
  (`<b>`, `<span style>`, `<a href>`, `<br>`). `plot_json()` escapes every string
  a figure carries as data (the keys in PLOT_DATA_KEYS, at any depth) into
  entities that Plotly shows as the characters they stand for. A figure's
  fixed wording (titles, hovertemplates) keeps its markup, so it must hold no
  name: a name goes into a data key (`text`, `customdata`, `name`, `x`, ...)
  and a hovertemplate refers to it (`%{text}`), which also keeps a name's `%{`
  from being read as a template variable.
"""

from __future__ import annotations

import json
import math

# The figure keys whose strings are data (shown by Plotly as pseudo-HTML).
PLOT_DATA_KEYS = frozenset({"x", "y", "z", "text", "customdata", "name", "ticktext",
                            "categoryarray", "labels"})
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                   "\u2029": "\\u2029"}
_PLOTLY_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def plotly_text(s: str) -> str:
    """A string that Plotly's pseudo-HTML shows as exactly these characters."""
    return "".join(_PLOTLY_ESCAPES.get(c, c) for c in s)


def _json_safe(v, data: bool = False):
    """JSON that JSON.parse accepts (non-finite floats become null), with the
    strings under PLOT_DATA_KEYS escaped for Plotly."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, str):
        return plotly_text(v) if data else v
    if isinstance(v, dict):
        return {k: _json_safe(x, data or k in PLOT_DATA_KEYS) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x, data) for x in v]
    return v


def plot_json(fig: dict) -> str:
    """A Plotly figure (plain dicts) as the JSON the page's script draws: every
    data string escaped for Plotly, and nothing in it can close the <script>."""
    s = json.dumps(_json_safe(fig), separators=(",", ":"))
    return "".join(_SCRIPT_ESCAPES.get(c, c) for c in s)
