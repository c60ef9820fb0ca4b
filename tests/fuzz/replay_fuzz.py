"""Replay's fuzzer: crafted ops through `msprobe-atb replay --all`.
`make fuzz` runs it long (`python tests/fuzz/replay_fuzz.py`), `make test` briefly
(test_replay_fuzz.py); prints "fuzz replay-ops: N inputs tried, K findings".

An input is one leaf op of any type replay implements: an op_param.json of the keys
the references read, each set to a hostile value (NaN, Infinity, huge, negative,
strings, lists, objects, nothing) or the whole file garbled or nested deep; its
inputs of any shape and dtype (broadcast bombs too: [N,1] and [1,N], a long index
vector); its outputs of any shape. Findings: an exit other than 0 or 1, a traceback,
a verdict whose reason is the runner's catch-all (a reference that did not foresee
the input), or more than PEAK bytes allocated while replaying (tracemalloc).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "offline"), str(Path(__file__).parent)]

from hypothesis_run import examples_main, run_in_tmp  # noqa: E402
from replay_craft import crafted_op, replay_json, traced  # noqa: E402

from msprobe_atb.offline.replay.refs import REFERENCES  # noqa: E402
from msprobe_atb.offline.replay.runner import REFERENCE_FAILED  # noqa: E402

PEAK = 128 << 20  # the inputs are at most ~100 KiB; a result made to fit is small
BOMB = 5000  # [BOMB, BOMB] float64 is 200 MB
KEYS = ["elewiseType", "activationType", "geluMode", "scale", "dim", "splitDim", "splitSizes",
        "splitNum", "axes", "perm", "concatDim", "axis", "batchDims", "hasBias", "transposeA",
        "transposeB", "enAccum", "matmulType", "quantMode", "layerType", "rotaryCoeff",
        "cosFormat", "headNum", "kvHeadNum", "qkScale", "qScale", "maskType", "calcType",
        "quantType", "scaleType", "clampType", "inputLayout", "mlaVHeadSize", "windowSize",
        "compressType", "kvCacheCfg", "hasQuantOffset"]
NESTED = {"mulsParam": ["varAttr"], "normParam": ["epsilon", "modelType", "quantType",
                                                  "dynamicQuantType", "rstd"]}
HOSTILE = st.one_of(
    st.integers(-3, 12), st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300,
                                          2**63, -2**63, 0.5, 1.0, True, False, None, "six",
                                          "", [], {}, [6], [-1], [0, 1], [1, 0], ["a"],
                                          [1.5, 0], {"x": 1}, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.lists(st.integers(-4, 8), max_size=4))


@st.composite
def params(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0:  # "deep": expanded when written (a short input to show when found)
        return draw(st.sampled_from(["deep", '{"elewiseType": 8', "", "null", "[]",
                                     "\x00\xff", '{"a": {"a": {"a": 1}}}']))
    p = {k: draw(HOSTILE) for k in draw(st.lists(st.sampled_from(KEYS), max_size=5))}
    for key, sub in NESTED.items():
        if draw(st.booleans()):
            p[key] = {k: draw(HOSTILE) for k in draw(st.lists(st.sampled_from(sub),
                                                                max_size=3))} \
                if draw(st.integers(0, 4)) else draw(HOSTILE)
    return json.dumps(p, allow_nan=True)


DTYPES = [np.float32, np.float16, np.int64, np.int32, np.bool_]
SHAPE = st.lists(st.integers(0, 6), max_size=4).map(tuple)


@st.composite
def tensors(draw, count_min: int, count_max: int) -> list[np.ndarray]:
    n = draw(st.integers(count_min, count_max))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bomb = draw(st.sampled_from([None, "broadcast", "column", "indices"]))
    shapes = [draw(SHAPE) for _ in range(n)]
    if bomb == "broadcast" and n >= 2:
        shapes[:2] = [(BOMB, 1), (1, BOMB)]
    elif bomb == "column" and n >= 2:
        shapes[:2] = [(BOMB, 1), (BOMB, 1)]
    elif bomb == "indices" and n >= 2:
        shapes[:2] = [(1, BOMB), (BOMB,)]
    out = []
    for shape in shapes:
        dtype = draw(st.sampled_from(DTYPES))
        x = rng.normal(size=shape) * draw(st.sampled_from([1.0, 1e4, 1e-4]))
        if dtype in (np.int64, np.int32):
            x = rng.integers(-2, 8, size=shape)
        out.append(np.asarray(x).astype(dtype))
    return out


def op_inputs():
    return st.tuples(st.sampled_from(sorted(REFERENCES)), params(), tensors(1, 5), tensors(1, 2))


def _one_op(base: Path):
    count = [0]

    def check(op_type: str, param: str, inputs: list, outputs: list) -> None:
        count[0] += 1
        root = base / str(count[0])
        try:
            text = "[" * 20000 + "]" * 20000 if param == "deep" else param
            crafted_op(root, op_type, text, inputs, outputs)
            (rc, doc, err), peak = traced(replay_json, root)
            assert rc in (0, 1) and "Traceback" not in err, (rc, err[-2000:])
            whys = [o["why"] for o in doc["ops"]]
            assert not any(REFERENCE_FAILED in w for w in whys), whys
            assert peak < PEAK, f"{peak} bytes allocated replaying {op_type}"
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return check


PROPERTIES = {"replay-ops": (_one_op, op_inputs)}


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    make, inputs = PROPERTIES[name]
    return run_in_tmp(name, make, inputs(), examples, derandomize)


def main() -> int:
    return examples_main(__doc__, list(PROPERTIES), run, 3000)


if __name__ == "__main__":
    raise SystemExit(main())
