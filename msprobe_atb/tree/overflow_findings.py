"""Who found an overflow, in words: ATB's report or the probe's own scan.

ATB's scan reads fp16 and bf16 outputs as fp16 and reports an Inf, fp32 an
Inf, and nothing else (README, "Overflow detection"). The shim names what its
own scan found in an output's real dtype (`finding` in `overflow` and
`incident` records); a report of ATB's whose outputs are all bf16 and hold no
NaN/Inf was a finite bf16 +-2^121 (bits 0x7C00/0xFC00) read as an fp16 Inf.
"""

from __future__ import annotations

from collections.abc import Iterable

ATB = "atb"
ATB_BF16_FINITE = "atb_bf16_finite"
SENTENCES = {
    ATB: "ATB reported an overflow",
    ATB_BF16_FINITE: "ATB reported an overflow, but as bf16 the output holds no Inf or NaN",
    "nan": "the probe found NaN (ATB does not report NaN)",
    "bf16_pinf": "the probe found bf16 +Inf (ATB reads bf16 as fp16)",
    "bf16_ninf": "the probe found bf16 -Inf (ATB reads bf16 as fp16)",
    "unscanned_inf": "the probe found Inf in a dtype ATB does not scan (it scans fp16, bf16 "
                     "and fp32)",
}


def of_report(outputs: Iterable[tuple[str, bool]]) -> str:
    """The finding of ATB's report from its kernel's outputs, (dtype name as the
    shim writes it, holds NaN/Inf) each: a false report when every one is a
    clean bf16."""
    outputs = list(outputs)
    if outputs and all(dtype == "bf16" and not bad for dtype, bad in outputs):
        return ATB_BF16_FINITE
    return ATB


def sentence(finding: str | None) -> str:
    if not finding:
        return ""
    return SENTENCES.get(finding, f"the probe found {finding}")
