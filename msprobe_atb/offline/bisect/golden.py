"""The golden output the chained run's error is measured against: the same op's dumped
output in a golden dump (an ATB dump of the same model, e.g. fp32), or, in a torch
golden (contracts §8), the last top-level module's output (the LM head), its last
token's row where it holds every position."""

from __future__ import annotations

import numpy as np

from ..read.binfile import BinFileError, load_bin
from ..read.table import filter_tensors, open_dump
from ..read.torch_dump import is_torch_dump
from ..replay.dumpops import dumped_ops
from .chain import ChainError


def _fit(golden: np.ndarray, like: np.ndarray, where: str) -> np.ndarray:
    """`golden` in the shape of `like`: whole, or its last rows where it holds more."""
    if golden.shape == like.shape:
        return golden
    width = like.shape[-1] if like.ndim else 1
    if golden.size >= like.size and golden.ndim and golden.shape[-1] == width:
        return golden.reshape(-1, width)[-(like.size // width):].reshape(like.shape)
    raise ChainError(f"{where} has shape {list(golden.shape)}, the chained output "
                     f"{list(like.shape)}: is the golden a run of the same model?")


def golden_output(path: str, round_: int, op_id: str, like: np.ndarray) -> np.ndarray:
    """The golden's counterpart of op `op_id`'s output 0 in round `round_`."""
    dump = open_dump(path)
    dump.tensors = filter_tensors(dump.tensors, round=round_)
    ops = dumped_ops(dump)
    if not ops:
        raise ChainError(f"the golden {path} holds no op in round {round_}")
    if is_torch_dump(dump):
        top = [o for o in ops if "_" not in o.op_id and o.dev_pid == ops[0].dev_pid]
        op, what = top[-1], "last top-level module"
    else:
        same = [o for o in ops if o.op_id == op_id and o.dev_pid == ops[0].dev_pid]
        if not same:
            raise ChainError(f"the golden {path} has no op {op_id} in round {round_}")
        op, what = same[0], f"op {op_id}"
    if not op.outputs or not op.outputs[0].path:
        raise ChainError(f"the golden's {what} ({op.path}) has no output dumped as a file")
    try:
        golden = load_bin(op.outputs[0].path)
    except BinFileError as e:
        raise ChainError(f"the golden's {what} output cannot be read: {e.problem}") from None
    return _fit(golden.astype(np.float64), like, f"the golden's {what} output ({op.path})")
