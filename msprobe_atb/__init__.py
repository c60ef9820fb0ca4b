"""msprobe-atb: runtime tensor-dump probe for ATB inference processes.

Layout, lowest room first (docs/map.md, "The order of the rooms"):
  config/    config schema, validation, presets, compile to the control block
  control/   the control block (cffi over native/include/msprobe_atb/control.h)
  tree/      record logs -> statistic.csv, info/, the manifest, markers, incidents
  recorder/  the flight recorder's control-plane side: triggers, `trigger`, status
  offline/   reading dumps: stats, compare, replay, diagnose, bisect, report, ...
  torch/     the PyTorch golden: Dumper and `run --torch` (the only importer of torch)
  daemon/    the per-output-dir control plane: watch, publish, drain records
"""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it
