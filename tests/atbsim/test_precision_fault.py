"""`atbsim run --precision-fault`: a layer's kernel keeps an intermediate in the
run's half type. Checked on real dumps (the stand-in under the real probe): the
fault changes its op's output and nothing the round computed before it; the run
stays deterministic; and a 4-layer fp16 run drifts further from fp32 at the
logits than the clean fp16 run. (Usage errors: test_cli.py.)"""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from offline_helpers import MODEL, make_real_dump, need_real, side_by_side
from testkit import atbsim_bin

from msprobe_atb.offline.read.binfile import load_payload, resolve

# One fault of each kind, each in its own place: (spec, layer, node index of the
# first op it changes, in the layer's node order of docs/atbsim_model.md).
FAULTS = [
    ("rmsnorm-fp16-accumulate:layer=0", 0, 0),  # both norms: InputNorm comes first
    ("rmsnorm-fp16-accumulate:layer=1,op=PostNorm", 1, 9),
    ("softmax-no-max-subtract:layer=1", 1, 5),
    ("swiglu-fp16-intermediate:layer=0", 0, 11),
    ("linear-fp16-accumulate:layer=1,op=OProj", 1, 6),
]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, Path]:
    """A clean fp16 dump of the tiny model and one per fault (task tensor)."""
    need_real()
    base = tmp_path_factory.mktemp("pfault")
    makers = {"clean": partial(make_real_dump, base / "clean", "fp16", task="tensor")}
    for n, (spec, _, _) in enumerate(FAULTS):
        makers[spec] = partial(make_real_dump, base / f"fault{n}", "fp16", task="tensor",
                               model=[*MODEL, "--precision-fault", spec])
    return side_by_side(makers)


def round0_tensors(dump: Path) -> dict[tuple[str, ...], bytes]:
    """Round 0's tensor payloads by path below the round (filter_level stubs followed)."""
    (proc,) = (dump / "atb_dump_data" / "data").iterdir()
    round0 = proc / "0"
    return {path.relative_to(round0).parts: load_payload(resolve(path)).tobytes()
            for path in round0.rglob("*.bin")}


def runs_before(rel: tuple[str, ...], top: int, node: int) -> bool:
    """Whether the tensor at `rel` was computed before node `node` of top-level op
    `top` wrote its output (that node's inputs included). The decode's top-level
    ops, later in the round, have higher ids."""
    rel_top = int(rel[0].split("_")[0])
    if rel_top != top:
        return rel_top < top
    if rel[1] in ("before", "after"):  # the layer's own inputs / outputs
        return rel[1] == "before"
    rel_node = int(rel[1].split("_")[0])
    return rel_node < node or (rel_node == node and "before" in rel[2:])


@pytest.mark.parametrize("spec,layer,node", FAULTS)
def test_fault_changes_its_op_and_nothing_before_it(dumps, spec, layer, node):
    clean, faulty = round0_tensors(dumps["clean"]), round0_tensors(dumps[spec])
    assert clean.keys() == faulty.keys()
    top = layer + 1  # prefill: op 0 is WordEmbedding
    before = [rel for rel in clean if runs_before(rel, top, node)]
    assert len(before) > 10
    assert [rel for rel in before if clean[rel] != faulty[rel]] == []
    (op_out,) = [rel for rel in clean if rel[0].startswith(f"{top}_") and len(rel) == 4
                 and rel[1].startswith(f"{node}_") and rel[2] == "after"
                 and rel[3].startswith("outtensor0")]
    assert clean[op_out] != faulty[op_out]


def run_logits(tmp_path: Path, name: str, *args: str) -> np.ndarray:
    """The logits of every step of an `atbsim run` without a probe."""
    out = tmp_path / f"{name}.f32"
    res = subprocess.run([str(atbsim_bin(1)), "run", *args, "--logits-out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return np.fromfile(out, dtype="<f4").reshape(-1, 256)


def test_faults_are_deterministic(tmp_path):
    every = [a for spec, _, _ in FAULTS for a in ("--precision-fault", spec)]
    args = ["--layers", "2", "--decode-steps", "3", "--dtype", "bf16", *every]
    first, second = run_logits(tmp_path, "a", *args), run_logits(tmp_path, "b", *args)
    assert first.tobytes() == second.tobytes()
    assert first.tobytes() != run_logits(tmp_path, "clean", *args[:6]).tobytes()


def drift(logits: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max |logits - ref|, the lowest cosine similarity of a step's logits)."""
    cos = (logits * ref).sum(1) / np.linalg.norm(logits, axis=1) / np.linalg.norm(ref, axis=1)
    return float(np.abs(logits - ref).max()), float(cos.min())


def test_fault_drifts_further_from_fp32_at_the_logits(tmp_path):
    model = ["--layers", "4"]  # otherwise the default model (hidden 64, vocab 256)
    ref = run_logits(tmp_path, "fp32", *model, "--dtype", "fp32")
    clean = drift(run_logits(tmp_path, "fp16", *model, "--dtype", "fp16"), ref)
    faulty = drift(run_logits(tmp_path, "fault", *model, "--dtype", "fp16", "--precision-fault",
                              "linear-fp16-accumulate:layer=0,op=QKV"), ref)
    # Figures in docs/atbsim_model.md: max abs 1.33e-3 clean, 2.02e-3 faulty.
    assert faulty[0] > 1.4 * clean[0]
    assert faulty[1] < clean[1]
    assert np.isfinite(faulty[0])
