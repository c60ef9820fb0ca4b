"""Fixtures of the PyTorch golden: a tiny Hugging Face Llama checkpoint,
made by scripts/tiny_llama.py with transformers' own `save_pretrained` (no hub).

torch and transformers are imported inside the fixture: collecting the other test
folders never pays for them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "scripts"))

from tiny_llama import make_tiny_llama  # noqa: E402


@pytest.fixture(scope="session")
def tiny_llama_checkpoint(tmp_path_factory) -> Path:
    """A directory holding scripts/tiny_llama.py's random `LlamaForCausalLM`
    (config.json + model.safetensors, float32, TINY_LLAMA's shape, weights at a trained
    model's scale); the same weights on every run. Load it with
    `LlamaForCausalLM.from_pretrained(path)`."""
    return make_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))
