"""The diagnosis as a person reads it, in one line per process ("root cause: ...;
consequence: ..."), and as data for --json."""

from __future__ import annotations

import math

from msprobe_atb.tree.models import round_label

from ..read.jsonsafe import jsonable
from ..replay.dumpops import DumpedOp
from ..replay.runner import OpResult
from ..replay.text import brief, number
from .anomalies import Anomaly
from .engine import Chain, Diagnosis

NO_CAUSE = "no cause found"
SHORT_DTYPES = {"float16": "fp16", "bf16": "bf16", "float": "fp32", "double": "fp64"}


def _where(d: Diagnosis, op: DumpedOp) -> str:
    """'decode round 2', with the device where the dump has several processes."""
    label = round_label(op.round, d.models.get((op.dev_pid, op.rel.split("/")[0])))
    return f"device {op.dev_pid.split('_')[0]}, {label}" if d.several else label


def _dtype(r: OpResult) -> str:
    dtype = next((o["dtype"] for o in r.outputs if o.get("verdict") == r.verdict), None) \
        or (r.op.outputs[0].dtype if r.op.outputs else "")
    return SHORT_DTYPES.get(dtype, dtype)


def _how_wrong(r: OpResult) -> str:
    """'output 1000x its float64 reference', or the worst element's two values."""
    worst = next((o["worst"] for o in r.outputs if o.get("worst")), None)
    if worst is None:
        return r.why
    d, f = worst["dumped"], worst["float64"]
    if math.isfinite(d) and math.isfinite(f) and f != 0 and d != 0:
        ratio = abs(d / f)
        if ratio >= 2 or ratio <= 0.5:
            return f"output {ratio:.4g}x its float64 reference"
    return f"output {number(d)} where float64 is {number(f)}"


def cause_text(d: Diagnosis, c) -> str:
    where = _where(d, c.op)
    if c.verdict == "own-error":
        return f"{c.op.rel} own-error ({where}: {_how_wrong(c.result)})"
    if c.verdict == "overflow":
        return f"{c.op.rel} overflow ({where}: its exact result leaves {_dtype(c.result)})"
    if c.verdict == "reported":
        return (f"{_found_in(c.finding, c.op.rel, where)}; its inputs were not dumped: dump "
                "them with task tensor to find whether the op or its inputs are at fault")
    src = c.source
    if src["kind"] == "KV cache":
        return (f"KV cache {src['tensor']} read by {c.op.rel} ({where}) carries a bad value "
                "written in an earlier round, not among those read")
    if src.get("what"):  # a weight past the same weight of the other layers
        return (f"{src['kind']} {src['tensor']} already bad when read by {c.op.rel} ({where}: "
                f"its {src['what']}, no op of the dump wrote it)")
    return (f"{src['kind']} {src['tensor']} already bad when read by {c.op.rel} ({where}: "
            "it held NaN/Inf or jumped before any op of the dump wrote it)")


def _found_in(finding: str, op: str, where: str) -> str:
    """'ATB reported an overflow in OP (prefill round 0)', 'the probe found NaN in OP
    (prefill round 0; ATB does not report NaN)': who found what, where."""
    head, paren, why = finding.partition(" (")
    return f"{head} in {op} ({where}" + (f"; {why}" if paren else ")")


def _false_report_line(d: Diagnosis, a: Anomaly) -> str:
    t = a.tensor
    where = f"device {t['dev_pid'].split('_')[0]}, " if d.several else ""
    return (f"{NO_CAUSE}: ATB's overflow report of {t['op']} ({where}{t['round_label']}) is "
            f"false: as bf16 its output holds no Inf or NaN (abs-max {number(_abs_max(t))}: "
            "ATB reads bf16 as fp16, and a finite bf16 +-2^121 is an fp16 Inf to it)")


def _abs_max(t: dict):
    values = [v for v in (t["max"], t["min"]) if isinstance(v, float)]
    return max(abs(v) for v in values) if values else t["max"]


def _anomaly_text(a: Anomaly) -> str:
    if a.kind == "reported":  # `what` is who found it
        return f"overflowed: {a.what}"
    return a.what if a.kind != "divergence" else "diverges from the golden"


def consequence_text(d: Diagnosis, op: DumpedOp, r: OpResult, a: Anomaly) -> str:
    if r.verdict == "overflow":
        return f"{op.rel} overflow ({_dtype(r)})"
    return f"{op.rel} {r.verdict} ({_where(d, op)}: {_anomaly_text(a)})"


def chain_line(d: Diagnosis, ch: Chain) -> str:
    text = f"root cause: {cause_text(d, ch.cause)}"
    for hop in ch.caches:
        if hop.writer is not None:  # else the cause itself names the cache
            text += (f"; carried by KV cache {hop.tensor} (written by {hop.writer.rel}, "
                     f"{_where(d, hop.writer)}) into {hop.reader.rel} "
                     f"({_where(d, hop.reader)})")
    if ch.consequence is not None:
        text += f"; consequence: {consequence_text(d, *ch.consequence)}"
    return text


def _unexplained_line(d: Diagnosis, a: Anomaly, why: str) -> str:
    t = a.tensor
    where = f"device {t['dev_pid'].split('_')[0]}, " if d.several else ""
    return (f"{NO_CAUSE}: {t['op']} {t['io']} {t['index']} {_anomaly_text(a)} ({where}"
            f"{t['round_label']}), and {why}")


def lines(d: Diagnosis) -> list[str]:
    """One line per process with a finding, earliest first; `no cause found` alone
    when there is none."""
    out = [chain_line(d, ch) for ch in d.chains]
    out += [_unexplained_line(d, a, why) for a, why in d.unexplained]
    out += [_false_report_line(d, a) for a in d.false_reports]
    return out or [NO_CAUSE]


def headline(d: Diagnosis) -> str:
    """The one line the commands lead with: the earliest finding."""
    return lines(d)[0]


def _op_json(d: Diagnosis, op: DumpedOp, r: OpResult | None) -> dict:
    return {"dev_pid": op.dev_pid, "round": op.round, "round_label": _where(d, op),
            "op": op.rel, "op_id": op.op_id, "op_type": op.op_type, "path": op.path,
            **({"replay": brief(r)} if r is not None else {})}


def diagnosis_json(d: Diagnosis) -> dict:
    chains = []
    for ch in d.chains:
        item = {"line": chain_line(d, ch), "dev_pid": ch.dev_pid,
                "cause": {"verdict": ch.cause.verdict, **_op_json(d, ch.cause.op, ch.cause.result),
                          **({"input": ch.cause.source} if ch.cause.source else {}),
                          **({"finding": ch.cause.finding} if ch.cause.finding else {})},
                "started_from": {"kind": ch.start.kind, "what": ch.start.what,
                                 "tensor": ch.start.tensor},
                "caches": [{"tensor": h.tensor, "reader": h.reader.path,
                            "writer": h.writer.path if h.writer else None} for h in ch.caches],
                "consequence": None}
        if ch.consequence is not None:
            op, r, a = ch.consequence
            item["consequence"] = {"verdict": r.verdict, "what": a.what, **_op_json(d, op, r)}
        chains.append(item)
    return jsonable({"line": headline(d), "lines": lines(d), "found": bool(d.chains),
                     "causes": chains,
                     "unexplained": [{"kind": a.kind, "what": a.what, "why": why,
                                      "tensor": a.tensor} for a, why in d.unexplained],
                     "false_reports": [{"what": a.what, "tensor": a.tensor}
                                       for a in d.false_reports]})
