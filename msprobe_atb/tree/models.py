"""Rounds as a user reads them: "prefill round 21", "decode round 59".

A round ({exec}) is ATB's execution count of a top-level op. The prefill and the
decode model are different ops, so they count apart: round directory 0 holds the
prefill of the first request and the first decode step, and a while later the
prefill is at round 21 and the decode at round 59. A model's kind comes from its
name (ATB-Models names them e.g. DecoderModel_Prefill and DecoderModel_Decoder); a
name with neither word is shown as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

_PREFILL = ("prefill", "encoder", "context")
_DECODE = ("decode", "incremental")


def model_kind(name: str | None) -> str:
    """"prefill", "decode", the model's own name, or "" when it is not known."""
    if not name:
        return ""
    low = name.lower()
    if any(w in low for w in _PREFILL):
        return "prefill"
    if any(w in low for w in _DECODE):
        return "decode"
    return name


def round_label(round_: int | str, model: str | None = None) -> str:
    kind = model_kind(model)
    return f"{kind} round {round_}" if kind else f"round {round_}"


def span_label(first: int, last: int, model: str | None = None) -> str:
    """"prefill round 21", "decode rounds 59-61"."""
    kind = model_kind(model)
    text = f"round {first}" if first == last else f"rounds {first}-{last}"
    return f"{kind} {text}" if kind else text


def spans(rounds: Iterable[int]) -> str:
    """18, 19, 20, 22 -> "18-20, 22"."""
    out: list[str] = []
    for r in sorted(set(rounds)):
        if out and out[-1][1] == r - 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in out)


def rounds_label(rounds: Iterable[int], model: str | None = None) -> str:
    """"prefill rounds 18-22", "decode round 59", "rounds 0-2"."""
    rounds = sorted(set(rounds))
    kind = model_kind(model)
    word = "round" if len(rounds) == 1 else "rounds"
    return f"{kind + ' ' if kind else ''}{word} {spans(rounds)}"


def layer_of(op_id: str | None, op_name: str | None) -> str:
    """The layer-level op of an op, as "{id}_{Name}" (the tensor table's `layer`)."""
    return f"{(op_id or '').split('_')[0]}_{(op_name or '').split('/')[0]}"


def model_of_layer(layer: str, models: dict) -> str | None:
    """The model of the layer-level op "{id}_{Name}": the one whose info/model topology
    has the node "<Name>_<id>" (`models`: offline.graph.load_model_graphs of the
    process), else the kind the op's own name says ("Prefill_layer"), else None."""
    gid, _, name = layer.partition("_")
    hit = models.get(gid)
    if hit is not None:
        node = hit[0][hit[1]]
        if node.name == f"{name}_{gid}":
            return node.model
    return name if model_kind(name) in ("prefill", "decode") else None


def rounds_by_model(pairs: Iterable[tuple[int, str | None]]) -> str:
    """(round, model) pairs as "prefill rounds 18-22, decode rounds 59-63"; rounds of
    no known model as "rounds 3-4"."""
    by_kind: dict[str, set[int]] = {}
    for rnd, model in pairs:
        by_kind.setdefault(model_kind(model), set()).add(rnd)
    order = sorted(by_kind, key=lambda k: (k != "prefill", k != "decode", k))
    return ", ".join(rounds_label(by_kind[k], k) for k in order)
