"""The headline cards at the top of a report: the diagnosis (the root cause, the
line `msprobe-atb diagnose` prints), and with a golden dump where the
first divergent op is (layer, op, round, device, model), how large the error is
there (NaN/Inf counts of both sides first, then max abs/rel error and cosine over
the elements finite on both sides), and the two tensors' values against each
other. The card is a list of blocks (`headline_blocks`), so later findings about
the same op add a block of their own. A comparison that was refused or is
incomplete says so instead of naming an op."""

from __future__ import annotations

import html
from collections.abc import Callable

from msprobe_atb.tree.graph import load_model_graphs
from msprobe_atb.tree.names import os_path

from ..compare.dumps import CompareResult, first_divergence
from ..compare.headline import NO_ERRORS, has_nonfinite, nonfinite_text
from ..read.binfile import BinFileError, TensorNotSaved, load_bin
from ..read.table import Dump
from ..replay.text import number
from . import figures as figs


def _facts(rows: list[tuple[str, str]]) -> str:
    return "<dl class='facts'>" + "".join(
        f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rows) + "</dl>"


def model_of(dump: Dump, dev_pid: str, layer: str) -> str:
    """The model (info/model) whose topology holds the top-level op `layer`."""
    graphs = load_model_graphs(dump.layout.info, dev_pid)
    nodes = graphs.get(layer.partition("_")[0])
    return nodes[0][0].model if nodes else "unknown (no info/model for this op)"


def _where(fd: dict, target: Dump, round_: str) -> str:
    layer = fd["op"].split("/", 1)[0]
    proc = fd["target_process"] or "-"
    device, _, pid = proc.partition("_")
    torch = [("torch golden", f"{fd['golden_module']} ({fd['alignment']})")] \
        if fd.get("golden_module") else []
    return _facts([("layer", layer), ("op", fd["op"]),
                   ("tensor", f"{fd['io']} {fd['index']} ({fd['target_dtype'] or '-'}, "
                              f"shape {fd['target_shape'] or '-'})"), *torch,
                   ("round", round_), ("device", f"{device} (pid {pid or '-'})"),
                   ("model", model_of(target, proc, layer))])


def _size(fd: dict) -> str:
    rows = [("NaN/Inf in target", nonfinite_text(fd, "target")),
            ("NaN/Inf in golden", nonfinite_text(fd, "golden"))]
    if fd["mode"] == "tensor":
        over = " (finite on both sides)" if has_nonfinite(fd) else ""
        # |t-g| / |g| is |t| / eps where golden is 0: the atol floor keeps it readable
        rel = (f"max rel error, |t-g| / max(|g|, {figs.fmt_value(fd['atol'])}){over}",
               figs.fmt_value(fd["max_rel_err_atol"]))
        if fd["nonfinite_match"] is False:
            rows += [NO_ERRORS, rel]
        else:
            rows += [(f"max abs error{over}", figs.fmt_value(fd["max_abs_err"])), rel,
                     (f"cosine{over}", figs.fmt_value(fd["cosine"]))]
    else:
        rows += [(f"{k} golden / target", f"{figs.fmt_value(fd[f'golden_{k}'])} / "
                                          f"{figs.fmt_value(fd[f'target_{k}'])}")
                 for k in ("max", "min", "mean", "norm")]
    return _facts(rows)


def load_tensors(wanted: list[tuple[str, str | None]]) -> tuple[dict, str]:
    """{label: values} of the (label, .bin path) that load, and a paragraph
    naming those that do not and why ('' when all do)."""
    loaded, missing = {}, []
    for label, path in wanted:
        try:
            loaded[label] = load_bin(os_path(path) if path else path)
        except (BinFileError, TensorNotSaved, OSError, ValueError, TypeError) as e:
            missing.append(f"{label}: {e}" if path
                           else f"{label}: no .bin file (statistics only)")
    note = ("<p class='muted'>Not drawn: " + html.escape("; ".join(missing)) + "</p>"
            if missing else "")
    return loaded, note


def _values(fd: dict, plot: Callable[[dict], str], golden_path: str | None) -> str:
    loaded, note = load_tensors([("golden", golden_path), ("target", fd["target_path"])])
    return note or plot(figs.value_figure(loaded["golden"], loaded["target"]))


def headline_blocks(comparison: CompareResult, target: Dump,
                    plot: Callable[[dict], str]) -> list[str]:
    sc = comparison.scope
    if sc.incomplete:
        return ["<p class='bad'>Not a pass, and no op can be named as the first to diverge: "
                "the comparison is incomplete (see below).</p>"]
    fd = first_divergence(comparison)
    if fd is None:
        return [f"<p class='ok'>No divergent tensor: all {sc.checked} compared tensors are "
                "within tolerance.</p>"]
    where = _where(fd, target, comparison.round_label(fd))
    blocks = [f"<div class='headline'><div><h3>Where</h3>{where}</div>"
              f"<div><h3>How large</h3>{_size(fd)}</div></div>"]
    if comparison.first_replay:
        blocks.append(_replay_block(comparison.first_replay))
    # a torch golden's tensor as compared (concatenated, cut, reshaped), not its file
    al = comparison.torch_alignment
    golden_path = al.aligned_files.get(fd["target_path"], fd["golden_path"]) if al else \
        fd["golden_path"]
    return [*blocks, f"<h3>Values</h3>{_values(fd, plot, golden_path)}"]


_VERDICT_MEANS = {
    "ok": "the op computed its outputs right from its inputs: the divergence came in upstream "
          "or lies within its dtype's tolerance",
    "own-error": "the op's inputs are finite and its output is not what they give",
    "overflow": "the op did what it was asked; its output dtype cannot hold the result",
    "input-bad": "an input already held NaN/Inf: look upstream",
    "not-replayable": "replay cannot recompute this op",
}


def _replay_block(b: dict) -> str:
    """Replay's verdict on the op (msprobe-atb replay): what it means, why, and the worst
    element's dumped and float64 values."""
    rows = [("verdict", f"{b['verdict']}: {_VERDICT_MEANS.get(b['verdict'], '')}"),
            ("op replayed", b["path"]), ("why", b["why"])]
    w = b.get("worst")
    if w:
        rows += [("worst element", str(w["index"])), ("dumped", number(w["dumped"])),
                 ("float64", number(w["float64"]))]
    cls = "ok" if b["verdict"] == "ok" else "bad"
    return f"<div class='replay {cls}'><h3>Is it the op? (replay)</h3>{_facts(rows)}</div>"


def diagnosis_block(doc: dict) -> str:
    """The diagnosis card: one line per process, as `msprobe-atb diagnose` says it."""
    cls = "bad" if doc["found"] or doc["unexplained"] else "ok"
    return "".join(f"<p class='{cls} diagnosis'>{html.escape(line)}</p>"
                   for line in doc["lines"])
