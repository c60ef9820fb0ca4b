"""The PyTorch golden: `Dumper` writes a torch model's modules into the dump tree the
ATB probe writes (torch/dumper.py says how modules become ops and rounds).

`from msprobe_atb.torch import Dumper` imports torch; the package's other modules
(config checks, `run --torch`'s start-up hook and summary) do not, and nothing
outside this package imports it."""

from __future__ import annotations

__all__ = ["Dumper"]


def __getattr__(name: str):
    if name == "Dumper":
        from msprobe_atb.torch.dumper import Dumper

        return Dumper
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
