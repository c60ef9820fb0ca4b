"""Bisect's fuzzer: seeded faults anywhere, through `msprobe-atb bisect` on real stand-in
dumps. `make fuzz` runs it long (`python tests/fuzz/bisect_fuzz.py`), `make test`
briefly (test_bisect_fuzz.py); prints "fuzz bisect-cases: N inputs tried, K findings".

An input is a 4-layer stand-in run (hidden 512, vocab 1024; fp16 or bf16; any weight
seed) with one fault in any layer: a kernel precision fault (linear-fp16-accumulate on
any Linear op, rmsnorm-fp16-accumulate on either norm) or an op's output scaled by 1.01
to 1.3. Findings: an exit other than 0, a run that does not give the dump back bit for
bit, more chained runs than 2·k·log2(n) + n, a set that leaves the error above the
target, and, when the error before is above the target, a set without the faulty op
(the error put on other ops).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
import sys
from pathlib import Path

from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "offline"),
                str(Path(__file__).parent)]

from hypothesis_run import examples_main, run_in_tmp  # noqa: E402
from offline_helpers import make_real_dump  # noqa: E402

from msprobe_atb.cli import main as cli_main  # noqa: E402

MODEL = ["--layers", "4", "--hidden", "512", "--heads", "8", "--vocab", "1024",
         "--prompt-len", "6", "--decode-steps", "0"]
# --inject / --precision-fault op name -> its node in a layer (docs/atbsim_model.md)
NODES = {"InputNorm": 0, "QKV": 1, "OProj": 6, "PostNorm": 9, "GateUp": 10, "SwiGLU": 11,
         "Down": 12, "MlpAdd": 13}
LINEAR = ["QKV", "OProj", "GateUp", "Down"]


@st.composite
def cases(draw) -> tuple[str, int, list[str], str]:
    """(dtype, seed, the atbsim options of the fault, the op id it hits)."""
    dtype = draw(st.sampled_from(["fp16", "bf16"]))
    seed = draw(st.integers(1, 1000))
    layer = draw(st.integers(0, 3))
    kind = draw(st.sampled_from(["linear", "rmsnorm", "scale"]))
    if kind == "linear":
        op = draw(st.sampled_from(LINEAR))
        fault = ["--precision-fault", f"linear-fp16-accumulate:layer={layer},op={op}"]
    elif kind == "rmsnorm":
        op = draw(st.sampled_from(["InputNorm", "PostNorm"]))
        fault = ["--precision-fault", f"rmsnorm-fp16-accumulate:layer={layer},op={op}"]
    else:
        op = draw(st.sampled_from(sorted(NODES)))
        k = draw(st.sampled_from([1.01, 1.03, 1.1, 1.3, 0.9]))
        fault = ["--inject", f"scale={k}:layer={layer},op={op}"]
    return dtype, seed, fault, f"{layer + 1}_{NODES[op]}"


class SeededCases:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.n = 0

    def __call__(self, dtype: str, seed: int, fault: list[str], op: str) -> None:
        self.n += 1
        try:
            self._check(self.workdir / str(self.n), dtype, seed, fault, op)
        finally:
            shutil.rmtree(self.workdir / str(self.n), ignore_errors=True)  # 55 MB a dump

    def _check(self, out_dir: Path, dtype: str, seed: int, fault: list[str], op: str) -> None:
        d = make_real_dump(out_dir, dtype, model=[*MODEL, "--seed", str(seed), *fault])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = cli_main(["bisect", str(d), "--json"])
        assert rc == 0, f"exit {rc}"
        doc = json.loads(out.getvalue())
        chosen = [c["op_id"] for c in doc["chosen"]]
        n, k = doc["searchable"], len(chosen)
        assert doc["deployed_drift"] == 0.0, doc["deployed_drift"]
        assert doc["evaluations"] <= 2 * k * math.log2(n) + n, (doc["evaluations"], n, k)
        assert doc["reached"] and doc["after"] <= doc["target"], doc
        if doc["before"] > doc["target"]:
            assert op in chosen, (op, chosen, doc["ranking"][:3])


PROPERTIES = {"bisect-cases": (SeededCases, cases())}


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    make, inputs = PROPERTIES[name]
    return run_in_tmp(name, make, inputs, examples, derandomize)


def main() -> int:
    return examples_main(__doc__, list(PROPERTIES), run, 20)


if __name__ == "__main__":
    raise SystemExit(main())
