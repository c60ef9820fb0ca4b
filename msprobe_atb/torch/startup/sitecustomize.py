"""Started by Python at start-up when `msprobe-atb run --torch` put this directory
first on PYTHONPATH: sets up the torch dumper for the script (torch/autostart.py),
then runs the sitecustomize this one shadows, if any."""

import os
import sys

if os.environ.get("MSPROBE_ATB_TORCH_CONFIG"):
    try:
        from msprobe_atb.torch.autostart import chain_sitecustomize, install

        install()
        chain_sitecustomize(os.path.dirname(os.path.abspath(__file__)))
    except Exception as exc:  # never stop the script from starting
        print(f"[msprobe-atb] the torch dumper is not set up: {type(exc).__name__}: {exc}",
              file=sys.stderr)
