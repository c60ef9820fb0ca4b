"""The axes of the report's plots, so that no tick label reads like data:

* a log axis is labelled at powers of ten only (0.01, 0.1, 1, 10, ... and 1e-5,
  1e6 beyond), its range whole decades around the values (a single value still
  gets a decade, never a zoom into its last digits); over many decades every
  k-th decade is labelled;
* a linear value axis whose values span a tiny fraction of their size says so in
  its title (Plotly zooms into them: 25.667 to 25.6673 otherwise reads like a
  difference that matters);
* a layer axis labels at most MAX_LAYER_TICKS layers, evenly spread, upright
  (-90°), so labels never overlap;
* every title sits above the plot area, Plotly making room for it;
* a plot marking non-finite points (✕) keeps a band along its top for them
  (FLAG_BAND up), shaded, above every tick of its value axes, so a marker never
  sits at a value it does not have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MAX_DECADE_TICKS = 12
MAX_LAYER_TICKS = 40
TINY_SPAN = 1e-3  # a linear axis whose span is below this share of its size is zoomed
PLAIN_DECADES = range(-2, 4)  # 0.01 ... 1000 are written out, the others as 1eK
FLAG_BAND = 0.88  # the top of a plot from here (0..1) holds the ✕ markers
DATA_TOP = 0.84  # and its value axes end their ticks here


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def decade_text(k: int) -> str:
    return f"{10.0 ** k:g}" if k in PLAIN_DECADES else f"1e{k}"


def top_of(lo: float, hi: float, band: bool) -> float:
    """The axis end that puts `hi` at DATA_TOP of the plot (band) or just above it."""
    return lo + (hi - lo) / DATA_TOP if band else hi + 0.04 * (hi - lo)


def log_axis(title: str, values: Iterable, band: bool = False, **extra) -> dict:
    """A log axis over the finite positive `values`, labelled at decades only
    (`band`: leaving the top for ✕ markers)."""
    pos = [v for v in values if finite(v) and v > 0]
    lo = math.floor(math.log10(min(pos))) if pos else 0
    hi = math.ceil(math.log10(max(pos))) if pos else 1
    hi = max(hi, lo + 1)
    step = math.ceil((hi - lo) / MAX_DECADE_TICKS)
    ks = [k for k in range(lo, hi + 1) if k % step == 0]
    bottom = lo - 0.04 * (hi - lo)
    return {"type": "log", "title": {"text": title}, "range": [bottom, top_of(bottom, hi, band)],
            "tickmode": "array", "tickvals": [10.0 ** k for k in ks],
            "ticktext": [decade_text(k) for k in ks], "minor": {"showgrid": False},
            **extra}


def zoom_note(values: Iterable) -> str:
    """'' or, when the finite values span a tiny share of their size, what the
    axis is zoomed into."""
    vs = [float(v) for v in values if finite(v)]
    if not vs:
        return ""
    lo, hi = min(vs), max(vs)
    size = max(abs(lo), abs(hi))
    if hi == lo or size == 0 or (hi - lo) >= TINY_SPAN * size:
        return ""
    return f" (zoomed in: every value lies in {lo:.7g} to {hi:.7g}, a span of {hi - lo:.2g})"


def linear_axis(title: str, values: Iterable, **extra) -> dict:
    return {"type": "linear", "title": {"text": title + zoom_note(values)}, **extra}


def layer_ticks(order: list[str]) -> list[str]:
    """The layers that get a label: all, or every k-th (first and last kept)."""
    if len(order) <= MAX_LAYER_TICKS:
        return list(order)
    step = math.ceil(len(order) / MAX_LAYER_TICKS)
    shown = order[::step]
    return shown if shown[-1] == order[-1] else [*shown[:-1], order[-1]]


def layer_axis(order: list[str]) -> dict:
    ticks = layer_ticks(order)
    return {"type": "category", "categoryorder": "array", "categoryarray": order,
            "tickmode": "array", "tickvals": ticks, "ticktext": ticks, "tickangle": -90,
            "automargin": True, "title": {"text": "layer (top-level op)"
                                          + ("" if len(ticks) == len(order) else
                                             f"; {len(ticks)} of {len(order)} labelled")}}


def title(text: str) -> dict:
    """A plot title above the plot area: Plotly widens the top margin until it
    clears the plot area, its tick labels and axis titles (automargin)."""
    return {"text": text, "x": 0.5, "xanchor": "center", "xref": "paper", "y": 1,
            "yref": "paper", "yanchor": "bottom", "pad": {"b": 14}, "automargin": True}


def overlay_axis(over: str = "y") -> dict:
    """A hidden 0..1 axis over the plot for markers along its top edge."""
    return {"overlaying": over, "range": [0, 1], "visible": False, "fixedrange": True}


def flag_band() -> dict:
    """The shaded strip along the top of a plot where its ✕ markers sit."""
    return {"type": "rect", "xref": "paper", "yref": "paper", "x0": 0, "x1": 1,
            "y0": FLAG_BAND - 0.02, "y1": 1, "fillcolor": "#f7e9f0", "line": {"width": 0},
            "layer": "below"}
