"""`msprobe-atb replay` on a torch dump: the modules whose class fixes
what they compute from their dumped arguments (the activations) are recomputed in
float64; every other module is listed with the reason, named by its module."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from msprobe_atb.cli import main
from msprobe_atb.offline.diagnose.engine import diagnose
from msprobe_atb.offline.read.binfile import load_bin
from msprobe_atb.offline.read.binwrite import bin_bytes
from msprobe_atb.offline.read.table import open_dump
from msprobe_atb.offline.replay.text import brief, brief_line

SILU = {"2_3_1": "model.layers.0.mlp.act_fn", "3_3_1": "model.layers.1.mlp.act_fn"}
FLOAT32 = 0  # the .bin dtype code


def replay(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["replay", *map(str, args)])
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def dump(tiny_llama_checkpoint, tmp_path_factory) -> Path:
    """The prefill of the tiny Llama, every module's tensors (save_child)."""
    import torch
    from transformers import LlamaForCausalLM

    from msprobe_atb.torch import Dumper

    model = LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint).eval()
    out = tmp_path_factory.mktemp("torch_replay")
    with torch.no_grad(), Dumper(model, output=out, config={
            "dump_enable": True, "task": "tensor", "exec_range": "0", "save_child": True}):
        model(torch.tensor([[1, 2, 3, 4, 5]]))
    return out / "atb_dump_data"


def test_activations_replay_ok_and_the_other_modules_say_why_not(dump):
    rc, text = replay("--all", "--json", dump)
    doc = json.loads(text)
    assert rc == 0 and doc["first"] is None
    ops = {o["op_id"]: o for o in doc["ops"]}
    assert len(ops) == 30  # every module below the model: 4 + 13 per layer
    for op_id, module in SILU.items():
        o = ops.pop(op_id)
        assert (o["op_type"], o["module"], o["verdict"]) == ("SiLUActivation", module, "ok")
        assert o["outputs"][0]["max_rel_err"] < 1e-6  # fp32 rounding only
    assert {o["verdict"] for o in ops.values()} == {"not-replayable"}
    assert not any("save_child" in o["why"] for o in ops.values())
    down = ops["2_3_3"]
    assert down["module"] == "model.layers.0.mlp.down_proj"
    assert down["why"] == ("torch module Linear (model.layers.0.mlp.down_proj): its weight is "
                           "a module parameter, which the torch dumper does not write")
    assert "rope_theta" in ops["1"]["why"] and "model.rotary_emb" in ops["1"]["why"]
    assert "the modules it calls are ops of their own" in ops["2_1"]["why"]  # self_attn


def test_text_names_the_module_beside_the_op_path(dump):
    rc, text = replay("--all", "-v", dump)
    assert rc == 0
    assert ("ok              0_" in text and "/0/3_LlamaDecoderLayer/3_LlamaMLP/1_SiLUActivation"
            "  (SiLUActivation model.layers.1.mlp.act_fn)" in text)
    assert "replayed: 2 ok, 28 not-replayable" in text


def test_an_altered_activation_output_is_its_own_error(dump, tmp_path):
    bad = tmp_path / "atb_dump_data"
    shutil.copytree(dump, bad)
    (out,) = bad.glob("data/*/0/3_LlamaDecoderLayer/3_LlamaMLP/1_SiLUActivation/after/"
                      "outtensor0.bin")
    x = load_bin(out).astype(np.float32)  # a writable copy
    x.flat[7] = x.flat[7] * 1.5 + 0.5
    out.write_bytes(bin_bytes(x.tobytes(), FLOAT32, x.shape))
    rc, text = replay("--all", bad)
    assert rc == 1
    first = text[text.index("first op at fault"):].splitlines()[0]
    assert "3_LlamaDecoderLayer/3_LlamaMLP/1_SiLUActivation is own-error" in first
    assert "(SiLUActivation model.layers.1.mlp.act_fn)" in text
    # another command's view of the tensor's op (stats, compare): the module itself
    key = (out.parents[5].name, 0, "3_3_1")  # data/{dev_pid}/0/...
    said = brief(diagnose(open_dump(str(bad)), judge=[key]).verdicts.get(key))
    assert (said["verdict"], said["module"]) == ("own-error", "model.layers.1.mlp.act_fn")
    assert "1_SiLUActivation, model.layers.1.mlp.act_fn): output 0" in brief_line(said)
