"""Replay verdicts as a person reads them, on the terminal and in JSON."""

from __future__ import annotations

from ..read.jsonsafe import jsonable
from .runner import VERDICT_RANK, OpResult


def _fmt_float(v) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def describe(result: OpResult) -> str:
    """One op's verdict as a person reads it: verdict, path, type (and the torch
    module's qualified name), and why."""
    what = result.op.op_type + (f" {result.op.module}" if result.op.module else "")
    line = f"{result.verdict:<15} {result.op.path}  ({what})"
    out = next((o for o in result.outputs if o.get("worst")), None)
    detail = result.why
    if out is not None:
        w = out["worst"]
        detail += (f"; worst element {w['index']}: dumped {w['dumped']:.6g}, float64 "
                   f"{w['float64']:.6g}; cosine {_fmt_float(out['cosine'])}, max abs err "
                   f"{_fmt_float(out['max_abs_err'])}, "
                   f"max rel err {_fmt_float(out['max_rel_err'])}")
    return f"{line}\n    {detail}"


def _golden_line(target, golden) -> str:
    if golden is None:
        return f"golden: {target.op.path} has no counterpart in the golden dump"
    return (f"the target's {target.op.rel} is {target.verdict}; golden's "
            f"{'replays ' + golden.verdict if golden.verdict == 'ok' else 'is ' + golden.verdict}")


def format_text(results, first, golden_of, show_ok: bool = True,
                lost: list[str] | None = None) -> str:
    """Every op's verdict (the ok ones only if `show_ok`), the counts, what the dump
    lost (`lost`: losses.format_losses lines), the first op at fault with the
    input-bad ops after it, and the golden's side."""
    lines = [describe(r) for r in results if show_ok or r.verdict != "ok"]
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICT_RANK}
    lines.append("")
    lines.append("replayed: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n))
    if lost:
        lines.append("the dump is not whole: the ops of what it lost were not replayed")
        lines += lost
    if first is None:
        lines.append("no op computed its outputs wrongly: every replayed op is ok"
                     if counts["ok"] == len(results) and not lost else
                     "no op is at fault among those that could be replayed")
    else:
        caused = [r for r in results[results.index(first) + 1:] if r.verdict == "input-bad"
                  and r.op.dev_pid == first.op.dev_pid]
        lines.append(f"first op at fault: {first.op.path} is {first.verdict}: {first.why}")
        if caused:
            lines.append(f"  then {len(caused)} later op(s) replay input-bad (their inputs "
                         "already hold NaN/Inf): " + ", ".join(r.op.rel for r in caused[:5])
                         + (", ..." if len(caused) > 5 else ""))
    if golden_of is not None:
        for r in results:
            if r.op.path in golden_of:
                lines.append(_golden_line(r, golden_of[r.op.path]))
    return "\n".join(lines)


def brief(result: OpResult | None) -> dict | None:
    """The verdict of one op for another command's summary (stats, compare, report,
    incidents): what, where, why, and the worst element."""
    if result is None:
        return None
    worst = next((o["worst"] for o in result.outputs if o.get("worst")), None)
    out = {"verdict": result.verdict, "path": result.op.path, "op_type": result.op.op_type,
           "why": result.why, "worst": worst}
    if result.op.module is not None:
        out["module"] = result.op.module
    return jsonable(out)


def number(v) -> str:
    """A value of a verdict (a float, or "inf"/"nan" text from jsonable) to 6 digits."""
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def brief_line(b: dict) -> str:
    """`brief` in one line: "replay: own-error (0_1/0/2_Prefill_layer/11_...): why"; a
    torch dump's op with its module: "(0_1/0/3_LlamaDecoderLayer/..., model.layers.1...)"."""
    where = b["path"] + (f", {b['module']}" if b.get("module") else "")
    text = f"replay: {b['verdict']} ({where}): {b['why']}"
    w = b.get("worst")
    if w:
        text += f"; worst element {w['index']}: dumped {number(w['dumped'])}, float64 " \
                f"{number(w['float64'])}"
    return text
