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
