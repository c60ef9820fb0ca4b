"""What `compare` prints: structure differences first, then what was compared
and whether that covers the dumps (a comparison that checked nothing or too
little says so and why, never "no divergent tensor"), then the first divergent
op, leading with its NaN/Inf counts (the metrics cover the finite elements),
then where the error grows most and the first unmatched tensors. The same as
JSON for `--json`."""

from __future__ import annotations

import math

import polars as pl

from ..replay.text import brief_line
from .dumps import CompareResult, error_growth, first_divergence

VERDICTS = ("pass", "fail", "golden-only", "target-only", "unreadable", "not-compared",
            "not-saved", "no-data")


# msProbe's N/A where NaN/Inf sit at different positions (compare/msprobe_cells.py)
NO_ERRORS = ("cosine, max abs err, max rel err", "N/A (NaN/Inf at different positions)")


def _g(v) -> str:
    return "-" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v))


def _growth(o: dict) -> str:
    """An error_growth entry's growth: 'x4.7', or 'from zero' (a ratio would be
    infinite)."""
    return "from zero" if o["from_zero"] else f"x{_g(o['growth'])}"


def _elements(shape: str | None) -> int | None:
    if shape is None:
        return None
    try:
        return math.prod(int(d) for d in shape.split("x") if d)
    except ValueError:
        return None


def nonfinite_text(row: dict, side: str) -> str:
    """'1 +Inf, 2 NaN' from a result row's counts; 'none' or 'unknown'."""
    counts = [(row.get(f"{side}_{k}"), name) for k, name in
              (("nan", "NaN"), ("pinf", "+Inf"), ("ninf", "-Inf"))]
    if all(n is None for n, _ in counts):
        return "unknown"
    return ", ".join(f"{n} {name}" for n, name in counts if n) or "none"


def has_nonfinite(row: dict) -> bool:
    return any(row.get(f"{s}_{k}") for s in ("golden", "target") for k in ("nan", "pinf",
                                                                            "ninf"))


def _structure(res: CompareResult) -> list[str]:
    sc = res.scope
    if not sc.structure:
        return []
    how = ("tensors at the same op ids were paired across the names, as asked (--pair-by-id)"
           if sc.paired_by_id else "tensors pair only where the op names agree; "
           "--pair-by-id pairs them by op id alone")
    return ["STRUCTURE DIFFERS: golden and target are not built alike (different models?); "
            + how, *[f"  {s}" for s in sc.structure], ""]


def _not_compared(sc) -> list[str]:
    """What the cluster could not do, said before anything else on coverage."""
    if not sc.lost_why:
        return []
    n = sum(sc.lost_why.values())
    return [f"NOT A PASS: {n} tensor pair(s) were NOT compared, because:",
            *[f"  - {k} pair(s): {why}" for why, k in sc.lost_why.items()], ""]


def _lost(sc) -> list[str]:
    """Selected tensors a dump never wrote (a full disk, a dropped queue): not in
    either table, so no pair says it; the dumps' own counts do."""
    if not sc.losses:
        return []
    return ["NOT A PASS: tensors the probe selected are missing from a dump, so they were "
            "not compared:", *sc.losses, ""]


def _coverage(res: CompareResult) -> list[str]:
    sc = res.scope
    if not sc.low:
        return ["NOT A PASS: the dumps differ in structure (above)."] if sc.incomplete else []
    if sc.checked == 0:
        head = ("NOTHING WAS COMPARED: no tensor of one dump has a counterpart in the other, "
                "so this is not a pass.")
    else:
        head = (f"NOT A PASS: only {sc.checked} of the smaller dump's "
                f"{min(sc.golden, sc.target)} tensors were compared (less than "
                f"{sc.min_matched:.0%}; --min-matched sets the share).")
    cause = "Likely cause:" if len(sc.causes) == 1 else "Likely causes:"
    return [head, cause, *[f"  - {c}" for c in sc.causes], ""]


def _divergence(res: CompareResult, fd: dict, structure_differs: bool) -> list[str]:
    lines = [f"FIRST DIVERGENT op (target execution order): {res.round_label(fd)}, "
             f"{fd['op']} {fd['io']} {fd['index']} [{fd['mode']}]"]
    if structure_differs:
        lines.append("  caution: the dumps differ in structure, so the two sides of this pair "
                     "may be different ops of the two models")
    why = [w for w in (fd["reason"] or "").split("; ") if w]
    if has_nonfinite(fd):
        what = "positions" if fd["mode"] == "tensor" else "counts"
        same = "the same" if fd["nonfinite_match"] else "different"
        lines.append(f"  NaN/Inf: target {nonfinite_text(fd, 'target')}; golden "
                     f"{nonfinite_text(fd, 'golden')} ({same} {what})")
        why = [w for w in why if not w.startswith("NaN/Inf differ")]  # said just above
    if fd["mode"] == "tensor":
        n = _elements(fd["target_shape"])
        over = (f"over the elements finite on both sides (of {n})" if has_nonfinite(fd)
                else f"over all {n} elements" if n is not None else "")
        errors = ""
        if fd["nonfinite_match"] is False:
            lines.append(f"  {NO_ERRORS[0]}: {NO_ERRORS[1]}")
        else:
            errors = (f"cosine {_g(fd['cosine'])}, max abs err {_g(fd['max_abs_err'])}, max "
                      f"rel err {_g(fd['max_rel_err'])}, ")
        lines.append(f"  {over}: {errors}rmse {_g(fd['rmse'])}, within tol "
                     f"{_g(fd['within_tol'])}")
    if why:
        lines.append(f"  {'; '.join(why)}")
    if fd.get("golden_module"):
        lines.append(f"  torch golden: {fd['golden_module']} ({fd['alignment']})")
    if fd["golden_path"] or fd["target_path"]:
        lines.append(f"  golden: {fd['golden_path'] or '-'}")
        lines.append(f"  target: {fd['target_path'] or '-'}")
    return lines


def format_summary(res: CompareResult, outputs: list[str] | None = None) -> str:
    sc = res.scope
    counts = {v: res.count(v) for v in VERDICTS}
    lines = list(res.diagnosis["lines"]) if res.diagnosis else []
    lines += _structure(res)
    # not compared: paired, but the cluster could not answer for them (said below)
    unpaired = {k: counts[k] for k in ("target-only", "golden-only", "not-compared")
                if counts[k]}
    pairs = res.rows.height - sum(unpaired.values())
    lines += [", ".join([f"{pairs} pairs compared", *(f"{v} {k}" for k, v in unpaired.items())])
              + f" (processes {', '.join(f'{a}→{b}' for a, b in res.process_pairs[:4])}"
              + (f" and {len(res.process_pairs) - 4} more)" if len(res.process_pairs) > 4
                 else ")"),
              "  " + ", ".join(f"{k} {v}" for k, v in counts.items()
                               if v or k in ("pass", "fail")),
              f"  checked {sc.checked} of {sc.golden} golden and {sc.target} target tensors "
              "(inputs before and outputs after each op)"]
    lines.append("  " + res.engine.summary())
    for note in sc.notes + res.unpaired + res.problems[:10]:
        lines.append(f"  note: {note}")
    if res.torch_alignment is not None:
        lines += res.torch_alignment.lines()
    lines.append("")
    lines += _not_compared(sc) + _lost(sc) + _coverage(res)
    fd = first_divergence(res)
    if fd is not None:
        lines += _divergence(res, fd, bool(sc.structure))
        if res.first_replay:
            lines.append("  " + brief_line(res.first_replay))
    elif sc.incomplete:
        if sc.checked:  # with none, "NOTHING WAS COMPARED" above says it all
            lines.append(f"No divergent tensor among the {sc.checked} compared, but the "
                         "comparison is incomplete (above).")
    elif sc.losses:
        lines.append(f"No divergent tensor among the {sc.checked} compared, but the dumps lack "
                     "tensors the probe selected (above): the comparison is incomplete.")
    elif counts["unreadable"] or counts["not-compared"]:
        lines.append(f"No divergent tensor among those read, but "
                     f"{counts['unreadable'] + counts['not-compared']} could not be read or "
                     "compared (see the `reason` column): the comparison is incomplete.")
    else:
        lines.append(f"No divergent tensor: all {sc.checked} compared tensors are within "
                     "tolerance.")
    growth = error_growth(res)
    if growth:
        lines.append("Largest error growth (worst output error / worst input error):")
        for o in growth:
            lines.append(f"  {res.round_label(o)} {o['op']}: {_g(o['err_in'])} -> "
                         f"{_g(o['err_out'])} ({_growth(o)})")
    un = res.rows.filter(pl.col("verdict").is_in(["golden-only", "target-only"]))
    if un.height:
        other = un.filter(~pl.col("primary").fill_null(False)).height
        lines.append(f"Unmatched tensors ({un.height}), first ones:")
        if other:
            lines.append(f"  ({other} of them are at the other two stages, before/outtensor or "
                         "after/intensor, which only a dump with all four stages has)")
        for r in un.sort(pl.col("primary").fill_null(False), descending=True, maintain_order=True
                         ).head(10).iter_rows(named=True):
            lines.append(f"  {r['verdict']}: {res.round_label(r)} {r['op']} {r['stage']} {r['io']} "
                         f"{r['index']}")
    if outputs:
        lines.append("All rows: " + ", ".join(outputs))
    return "\n".join(lines)


def summary_json(res: CompareResult, outputs: list[str], notes: list[str]) -> dict:
    sc = res.scope
    fd = first_divergence(res)
    return {
        "counts": {v: res.count(v) for v in VERDICTS},
        "process_pairs": [list(p) for p in res.process_pairs],
        "coverage": {"golden": sc.golden, "target": sc.target, "checked": sc.checked,
                     "min_matched": sc.min_matched},
        "incomplete": sc.incomplete, "structure": sc.structure,
        "paired_by_id": sc.paired_by_id, "causes": sc.causes,
        "notes": [*sc.notes, *res.unpaired, *notes], "problems": res.problems,
        "first_divergence": fd and {**fd, "round_label": res.round_label(fd)},
        "first_divergence_replay": res.first_replay,
        "error_growth": [{**o, "round_label": res.round_label(o)} for o in error_growth(res)],
        "engine": res.engine.as_dict(), "outputs": outputs, "exit_code": res.exit_code(),
        "torch_alignment": res.torch_alignment and res.torch_alignment.as_dict(),
        "diagnosis": res.diagnosis,
    }
