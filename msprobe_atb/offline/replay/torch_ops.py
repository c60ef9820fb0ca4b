"""Which modules of a torch dump replay can recompute, and why the others cannot.

A torch dump (contracts §8) holds each module's arguments and outputs, not its
parameters or buffers, and no op_param.json. So a module replays only when its
class alone fixes what it computes and every operand is an argument: the
activations. Each maps to the float64 reference of the ATB op that computes the
same (refs.py) and the param that says so. A class listed with a text is known
not to replay, for the reason the text gives; any other class gets a general one.
"""

from __future__ import annotations

_WEIGHT = "its weight is a module parameter, which the torch dumper does not write"
_SILU = ("ActivationOperation", {"activationType": 4, "scale": 1.0})
_GELU_TANH = ("ActivationOperation", {"activationType": 2, "geluMode": 0})

# class name (type(module).__name__) -> (reference op type, its param), or why not
TORCH_MODULES: dict[str, tuple[str, dict] | str] = {
    "SiLU": _SILU,  # torch.nn
    "SiLUActivation": _SILU,  # transformers
    "ReLU": ("ActivationOperation", {"activationType": 1}),
    "Sigmoid": ("ActivationOperation", {"activationType": 8}),
    "GELUActivation": ("ActivationOperation", {"activationType": 2, "geluMode": 1}),  # erf
    "NewGELUActivation": _GELU_TANH,
    "FastGELUActivation": _GELU_TANH,
    "PytorchGELUTanh": _GELU_TANH,
    "GELUTanh": _GELU_TANH,
    # x * sigmoid(1.702 x): ATB's fast gelu, written without overflow
    "QuickGELUActivation": ("ActivationOperation", {"activationType": 3}),
    "GELU": "whether it is the erf or the tanh form is its `approximate` attribute, "
            "which the torch dumper does not write",
    "Linear": _WEIGHT,
    "Embedding": _WEIGHT,
    "LayerNorm": _WEIGHT,
    "RMSNorm": _WEIGHT,
    "LlamaRMSNorm": _WEIGHT,
    "LlamaRotaryEmbedding": "its inverse frequencies are a module buffer made from the "
                            "model config (rope_theta, head size), which the torch dumper "
                            "does not write",
}


def torch_reference(cls: str, calls_modules: bool) -> tuple[str, dict] | str:
    """(reference op type, param) for a module class, or why it does not replay;
    `calls_modules`: modules it called are ops of the dump too."""
    entry = TORCH_MODULES.get(cls)
    if entry is not None:
        return entry
    if calls_modules:
        return ("no float64 reference maps this module class (the modules it calls are ops "
                "of their own, judged apart; what its own code computes between them is not "
                "replayed)")
    mapped = sorted(c for c, e in TORCH_MODULES.items() if not isinstance(e, str))
    return ("no float64 reference maps this module class, and its parameters or buffers, "
            f"if any, are not in a torch dump (replay maps {', '.join(mapped)})")
