"""Test-only writer of round dirs in the exact form msProbe's own ATB probe leaves
on disk (docs/msprobe_format.md §5.4, §6, §7, §8), so the tests can show our tools read them:

* only `before/intensor*` and `after/outtensor*` (msProbe's path gate);
* `.bin` headers as docs/msprobe_format.md §7, dtype and format as decimal codes; with save_child
  and filter_level 1, a tensor whose bytes an earlier tensor of the same layer
  had becomes a stub `data=<ids>_<intensor|outtensor><i>.bin` naming that first
  occurrence by op id (msProbe finds "the same tensor" from the graph; equal
  bytes stand in for it here);
* `statistic.csv` with the 15 columns, statistics printed like `std::to_string`
  (6 decimals, integers plain, `inf`/`-inf`/`nan`/`-nan`; an all-NaN float tensor
  has Max -FLT_MAX and Min FLT_MAX, the start values of its max/min), rows in a shuffled
  (thread-pool) order, and no row for a tensor whose cell starting with `-` holds
  anything but `,-./0-9:;` (so a `-inf` Min or a `-nan` Mean drops the row);
  no `statistic_extra.csv`;
* `info/layer/{pid}/` (no device in the folder name: ASCEND_TOOLKIT_HOME unset),
  written with offline_synth.write_graphs.

Same interface as offline_synth.RoundWriter, so `small_model(writer=MsprobeRound)`
makes a whole msProbe-form dump.
"""

from __future__ import annotations

import csv
import math
import random
import re
from pathlib import Path

import numpy as np
from offline_synth import NP_CODES, bin_bytes

from msprobe_atb.offline.read.dtypes import dtype_name
from msprobe_atb.offline.read.table import CSV_COLUMNS
from msprobe_atb.offline.read.tensorstats import tensor_stats

FLT_MAX = float(np.finfo(np.float32).max)
_SAFE_NEGATIVE = re.compile(r"^-[,-;0-9]*$")  # the only cells starting with '-' kept


def to_string(v, integer: bool) -> str:
    """A statistic as C++ `std::to_string` prints it (x86: a NaN from arithmetic
    carries the sign bit, printed `-nan`)."""
    if integer:
        return str(int(v))
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    return f"{v:f}"


def row_kept(cells: list[str]) -> bool:
    """msProbe's CSV guard: one rejected cell drops the whole row."""
    return not any(c[:1] in ("+", "=", "@", "%") or (c[:1] == "-" and not
                   _SAFE_NEGATIVE.match(c)) for c in cells)


class MsprobeRound:
    """One `{dev}_{pid}/{exec}` dir as msProbe writes it; `close()` writes the CSV."""

    def __init__(self, data: Path, dev_pid: str, round_: int, task: str = "all",
                 save_child: bool = True, filter_level: int = 1, seed: int = 7):
        self.dir = data / dev_pid / str(round_)
        self.dev_pid, self.round, self.task = dev_pid, round_, task
        self.dedup = save_child and filter_level >= 1 and task != "statistics"
        self.rows: list[list[str]] = []
        self.dropped: list[Path] = []  # tensors written without a CSV row
        self.first: dict[tuple, str] = {}  # (layer, dtype, dims, bytes) -> alias key
        self.rng = random.Random(seed + round_)
        self.dir.mkdir(parents=True, exist_ok=True)

    def add(self, op_path: str, io: str, index: int, arr: np.ndarray,
            alias_to: Path | None = None, seq: int | None = None) -> Path:
        segs = op_path.split("/")
        ids = "_".join(s.partition("_")[0] for s in segs)
        names = "/".join(s.partition("_")[2] for s in segs)
        kind = "intensor" if io == "input" else "outtensor"
        f = self.dir / op_path / ("before" if io == "input" else "after") / f"{kind}{index}.bin"
        code = NP_CODES[arr.dtype]
        if self.task != "statistics":
            f.parent.mkdir(parents=True, exist_ok=True)
            same = (ids.split("_")[0], code, arr.shape, arr.tobytes())
            key = self.first.setdefault(same, f"{ids}_{kind}{index}.bin") if self.dedup else None
            stub = key is not None and key != f"{ids}_{kind}{index}.bin"
            f.write_bytes(bin_bytes(b"" if stub else arr.tobytes(), code, arr.shape,
                                    alias=key if stub else None))
        st = tensor_stats(arr)
        integer = arr.dtype.kind in "iub"
        if arr.dtype.kind == "f" and arr.size and math.isnan(st["max"]):
            # No value but NaN: max and min keep their start values (docs/msprobe_format.md §8.4).
            st.update(max=-FLT_MAX, min=FLT_MAX)
        stats = ["N/A"] * 4 if self.task == "tensor" else [
            to_string(st[k], integer and k in ("max", "min")) for k in ("max", "min", "mean",
                                                                      "norm")]
        row = [self.dev_pid, str(self.round), names, names.split("/")[-1], ids, io,
               str(index), dtype_name(code), "nd", "x".join(map(str, arr.shape)), *stats,
               "N/A" if self.task == "statistics" else str(f)]
        if row_kept(row):
            self.rows.append(row)
        elif self.task != "statistics":
            self.dropped.append(f)
        return f

    def close(self, extra: bool = False) -> None:
        self.rng.shuffle(self.rows)
        with open(self.dir / "statistic.csv", "w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(CSV_COLUMNS)
            w.writerows(self.rows)
