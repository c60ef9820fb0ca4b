"""The PyTorch golden: `Dumper` writes a torch model's modules into the dump tree the
ATB probe writes (torch/dumper.py says how modules become ops and rounds).

Importing this package imports torch; nothing else in msprobe_atb does."""

from msprobe_atb.torch.dumper import Dumper

__all__ = ["Dumper"]
