"""msprobe-atb: runtime tensor-dump probe for ATB inference processes.

Layout:
  control/  the control block (cffi over native/include/msprobe_atb/control.h)
  config/   config schema, validation, presets, compile to the control block
  daemon/   the per-output-dir control plane: watch, publish, drain records
  tree/     record logs -> statistic.csv, info/layer, info/model, markers
  offline/  loading .bin tensors, stats, compare, convert, overflow, report
  torch/    the PyTorch golden: Dumper and `run --torch` (the only importer of torch)
"""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it
