"""torch_align's roles within an ATB decoder layer for the layer shapes ATB-Models
builds besides the stand-in's (q/k/v apart, gate/up apart, activation then Mul), and
the mapping file's checks: no torch, no dumps, milliseconds."""

from __future__ import annotations

import pytest

from msprobe_atb.offline.compare.torch_align import LayerRoles, Source, TorchNames, Unmatched
from msprobe_atb.offline.compare.torch_mapping import MappingError, read_mapping

L = "model.layers.3"


def roles(*types: str) -> dict[str, str]:
    return LayerRoles([(f"5_{i}", t) for i, t in enumerate(types)], L, None).roles


def test_the_stand_in_s_fused_layer():
    assert roles("RmsNormOperation", "LinearOperation", "SplitOperation", "RopeOperation",
                 "ReshapeAndCacheOperation", "SelfAttentionOperation", "LinearOperation",
                 "ElewiseOperation", "EventOperation", "RmsNormOperation", "LinearOperation",
                 "ActivationOperation", "LinearOperation", "ElewiseOperation") == {
        "5_0": "input_norm", "5_1": "qkv", "5_2": "split_qkv", "5_3": "rope", "5_4": "cache",
        "5_5": "attention", "5_6": "o_proj", "5_7": "attn_add", "5_9": "post_norm",
        "5_10": "gate_up", "5_11": "activation", "5_12": "down", "5_13": "mlp_add"}


def test_separate_projections_and_an_activation_then_mul():
    r = roles("RmsNormOperation", "LinearOperation", "LinearOperation", "LinearOperation",
              "RopeOperation", "PagedAttentionOperation", "LinearOperation", "ElewiseOperation",
              "RmsNormOperation", "LinearOperation", "LinearOperation", "ActivationOperation",
              "ElewiseOperation", "LinearOperation", "ElewiseOperation")
    assert r == {"5_0": "input_norm", "5_1": "q", "5_2": "k", "5_3": "v", "5_4": "rope",
                 "5_5": "attention", "5_6": "o_proj", "5_7": "attn_add", "5_8": "post_norm",
                 "5_9": "gate", "5_10": "up", "5_11": "activation", "5_12": "act_mul",
                 "5_13": "down", "5_14": "mlp_add"}
    lr = LayerRoles([("5_0", "RmsNormOperation")], L, "model.rotary_emb")
    act = lr.source("activation", "output", 0, swiglu=False)
    mul = lr.source("act_mul", "output", 0, swiglu=False)
    assert isinstance(act, Source) and act.text() == f"{L}.mlp.act_fn output 0"
    assert isinstance(mul, Source) and mul.text() == f"{L}.mlp.down_proj input 0"


def test_sources_of_fused_ops_and_what_has_none():
    lr = LayerRoles([("5_0", "RmsNormOperation")], L, "model.rotary_emb")
    assert lr.source("gate_up", "output", 0, False).text() == (
        f"concat({L}.mlp.gate_proj output 0 | {L}.mlp.up_proj output 0)")
    assert lr.source("rope", "input", 3, False).text() == "model.rotary_emb output 1"
    assert isinstance(lr.source("rope", "output", 0, False), Unmatched)
    assert isinstance(lr.source("qkv", "input", 1, False), Unmatched)  # the weight


def test_torch_names_of_a_llama():
    n = TorchNames.of({"model.embed_tokens", "model.rotary_emb", "model.layers.10",
                       "model.layers.2", "model.norm", "lm_head", "model.layers.2.mlp"})
    assert n.layers == ["model.layers.2", "model.layers.10"]
    assert (n.embed, n.norm, n.lm_head, n.rotary) == (
        "model.embed_tokens", "model.norm", "lm_head", "model.rotary_emb")


@pytest.mark.parametrize("text, says", [
    ("rules: {}", "a `rules:` list is needed"),
    ("rules: [{atb: x, io: sideways, index: 0}]", "io 'sideways'"),
    ("rules: [{atb: x, io: output}]", "needs atb, io and index"),
    ("rules: [{atb: x, io: output, index: 0, torch: [lm_head]}]", "'MODULE input|output INDEX'"),
    ("rules: [", "is not YAML"),
])
def test_a_bad_mapping_file_is_refused_naming_the_problem(tmp_path, text, says):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(MappingError) as e:
        read_mapping(f)
    assert says in str(e.value) and str(f) in str(e.value)
