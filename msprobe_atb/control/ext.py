"""The cffi extension over control.h (`_ctl`, built by _build.py), loaded once for
block.py and probefiles.py, with the error that says how to build it."""

from __future__ import annotations

from pathlib import Path


class ControlError(RuntimeError):
    """The block cannot be used; `refused` is True for another layout version."""

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def ext():
    """(ffi, lib) of the extension; ControlError if it was not built."""
    try:
        from msprobe_atb.control import _ctl
    except ImportError as exc:
        repo = Path(__file__).resolve().parents[2]
        raise ControlError(
            f"the control-block extension msprobe_atb/control/_ctl*.so is missing ({exc}); "
            f"run `make` (or `make pyext`) in {repo}"
        ) from None
    return _ctl.ffi, _ctl.lib
