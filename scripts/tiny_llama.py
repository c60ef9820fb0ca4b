"""A tiny random Hugging Face Llama checkpoint, made locally with transformers' own
`save_pretrained` (nothing comes from a hub): the model of the "Golden from PyTorch"
demo act and of tests/torch_golden.

    python scripts/tiny_llama.py DIR     # writes DIR/config.json, DIR/model.safetensors
"""

from __future__ import annotations

import sys
from pathlib import Path

# The checkpoint's shape. Non-default rope_theta and rms_norm_eps, so a reader that
# ignores config.json and keeps its own defaults computes a different model.
TINY_LLAMA = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=256,
    max_position_embeddings=128,
    rms_norm_eps=1e-5,
    rope_theta=500.0,
    tie_word_embeddings=False,
)
SEED = 0


def make_tiny_llama(path: Path) -> Path:
    """A random-initialised `LlamaForCausalLM` (config.json + model.safetensors, float32)
    with the TINY_LLAMA shape in `path`; the same weights on every run (torch seed 0).

    Every weight is drawn at the scale of a trained model (Linear ~ 1/sqrt(fan_in),
    norms ~ 1 +- 0.1, embeddings ~ 1) instead of transformers' init (std 0.02, norms
    exactly 1), so logits are O(1) and a swapped or transposed weight shows."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    model = LlamaForCausalLM(LlamaConfig(**TINY_LLAMA)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
    model.save_pretrained(path, safe_serialization=True)
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/tiny_llama.py DIR")
    print(make_tiny_llama(Path(sys.argv[1])))
