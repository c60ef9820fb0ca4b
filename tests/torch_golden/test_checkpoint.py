"""The tiny checkpoint fixture itself: what the stand-in reads is what torch loads."""

from __future__ import annotations

import json


def test_checkpoint_is_a_loadable_llama(tiny_llama_checkpoint):
    import torch
    from transformers import LlamaForCausalLM

    config = json.loads((tiny_llama_checkpoint / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["rms_norm_eps"] == 1e-5
    # transformers >= 5 nests the rope settings; older versions keep a flat rope_theta.
    assert config.get("rope_parameters", config)["rope_theta"] == 500.0
    assert (tiny_llama_checkpoint / "model.safetensors").is_file()
    model = LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint).eval()
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits
    # Trained-model scale (the fixture's point): logits of order one, not ~0.
    assert logits.shape == (1, 3, 256) and 0.1 < logits.std().item() < 100
