"""The control block shared with the shim (cffi over native control.h)."""

from msprobe_atb.control.block import (
    PROC_ABI_MISMATCH,
    PROC_AWAKE_SEEN,
    PROC_BAD_BLOCK,
    PROC_EXITED,
    ControlBlock,
    ControlError,
    ProcSlot,
    dump_root_of,
)

__all__ = [
    "PROC_ABI_MISMATCH", "PROC_AWAKE_SEEN", "PROC_BAD_BLOCK", "PROC_EXITED", "ControlBlock",
    "ControlError", "ProcSlot", "dump_root_of",
]
