"""Test-only writer of synthetic dumps: `.bin` files and the CSVs
(docs/msprobe_format.md §7, §8; docs/contracts.md §5), for unit tests that need no
native build."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from msprobe_atb.offline.read.binwrite import bin_bytes
from msprobe_atb.offline.read.dtypes import dtype_name
from msprobe_atb.offline.read.table import CSV_COLUMNS, EXTRA_COLUMNS
from msprobe_atb.offline.read.tensorstats import tensor_stats


def write_bin(path: Path, payload: bytes | np.ndarray, dtype: int,
              dims: tuple[int, ...] | None = None, alias: str | None = None) -> Path:
    if isinstance(payload, np.ndarray):
        dims = payload.shape if dims is None else dims
        payload = payload.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bin_bytes(payload, dtype, tuple(dims or ()), alias=alias))
    return path


NP_CODES = {np.dtype("float32"): 0, np.dtype("float16"): 1, np.dtype("int8"): 2,
            np.dtype("int32"): 3, np.dtype("int64"): 9, np.dtype("bool"): 12}


def _fmt(v) -> str:
    if v is None:
        return "N/A"
    return repr(v) if isinstance(v, float) else str(v)


class RoundWriter:
    """Writes one `{dev}_{pid}/{round}` dir: tensors and both CSVs, in call order.
    `stages`: the dump saves all four stages, so statistic_extra.csv has `Stage`."""

    def __init__(self, data: Path, dev_pid: str, round_: int, task: str = "all",
                 stages: bool = False):
        self.dir = data / dev_pid / str(round_)
        self.dev_pid, self.round, self.task, self.stages = dev_pid, round_, task, stages
        self.rows: list[list[str]] = []
        self.extra: list[list[str]] = []
        self.dir.mkdir(parents=True, exist_ok=True)

    def add(self, op_path: str, io: str, index: int, arr: np.ndarray,
            alias_to: Path | None = None, seq: int | None = None,
            stage: str | None = None) -> Path:
        segs = op_path.split("/")
        ids = "_".join(s.partition("_")[0] for s in segs)
        names = "/".join(s.partition("_")[2] for s in segs)
        sub = stage or ("before" if io == "input" else "after")
        fname = f"{'intensor' if io == 'input' else 'outtensor'}{index}.bin"
        f = self.dir / op_path / sub / fname
        code = NP_CODES[arr.dtype]
        status = "none"
        if self.task != "statistics":
            if alias_to is not None:
                write_bin(f, b"", code, arr.shape, alias=os.path.relpath(alias_to, f.parent))
                status = "stub"
            else:
                write_bin(f, arr, code)
                status = "bin"
        st = tensor_stats(arr)
        stats = [st["max"], st["min"], st["mean"], st["norm"]] if self.task != "tensor" \
            else [None] * 4
        self.rows.append([self.dev_pid, str(self.round), names, names.split("/")[-1], ids, io,
                          str(index), dtype_name(code), "nd", "x".join(map(str, arr.shape)),
                          *map(_fmt, stats),
                          "N/A" if self.task == "statistics" else str(f)])
        seq = len(self.extra) if seq is None else seq
        self.extra.append([str(seq), ids, names, io, str(index), str(st["count"]),
                           str(st["nan"]), str(st["pinf"]), str(st["ninf"]), str(st["zero"]),
                           status, "", *([sub] if self.stages else [])])
        return f

    def close(self, extra: bool = True) -> None:
        # names that are not UTF-8 (surrogate escapes) go in as their raw bytes
        with open(self.dir / "statistic.csv", "w", newline="", errors="surrogateescape") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(CSV_COLUMNS)
            w.writerows(self.rows)
        if extra:
            with open(self.dir / "statistic_extra.csv", "w", newline="",
                      errors="surrogateescape") as fh:
                w = csv.writer(fh, lineterminator="\n")
                w.writerow([*EXTRA_COLUMNS, *(["Stage"] if self.stages else [])])
                w.writerows(self.extra)


def small_model(root: Path, *, dtype=np.float32, inject: tuple[int, str] | None = None,
                rounds: int = 2, layers: int = 3, task: str = "all", pid: int = 4711,
                seed: int = 0, value: float = np.inf, writer=RoundWriter,
                names: dict[str, str] | None = None) -> Path:
    """A toy dump: per round, layers `{i}_Layer` with children 0_Norm, 1_Linear,
    2_Add; `inject=(layer, child)` puts `value` (+Inf) into that child's output at
    round 0. `writer` makes each round dir (RoundWriter: our form; see
    msprobe_form.py for msProbe's). `names` renames Layer, Norm, Linear or Add in
    the dump. Returns the output root."""
    shown = names or {}
    rng = np.random.default_rng(seed)
    data = root / "atb_dump_data" / "data"
    seqs = 0
    for r in range(rounds):
        w = writer(data, f"0_{pid}", r, task)
        x = rng.standard_normal(16).astype(np.float64)
        for layer in range(layers):
            lp = f"{layer + 1}_{shown.get('Layer', 'Layer')}"
            w.add(lp, "input", 0, x.astype(dtype), seq=seqs)
            seqs += 1
            h = x
            for ci, child in enumerate(("Norm", "Linear", "Add")):
                cp = f"{lp}/{ci}_{shown.get(child, child)}"
                w.add(cp, "input", 0, h.astype(dtype), seq=seqs)
                seqs += 1
                with np.errstate(invalid="ignore", over="ignore"):  # an injected inf spreads
                    h = {"Norm": lambda v: v / np.sqrt((v * v).mean() + 1e-6),
                         "Linear": lambda v: v * 1.5 + 0.1,
                         "Add": lambda v, x=x: v + x}[child](h)
                h = h.astype(dtype).astype(np.float64)
                if inject == (layer, child) and r == 0:
                    h = h.copy()
                    h[3] = value
                w.add(cp, "output", 0, h.astype(dtype), seq=seqs)
                seqs += 1
            w.add(lp, "output", 0, h.astype(dtype), seq=seqs)
            seqs += 1
            x = h
        w.close()
    return root


def write_graphs(root: Path, folder: str) -> None:
    """info/layer and info/model JSONs for small_model's layers (Norm, Linear,
    Add) under `info/{layer,model}/{folder}` (`{dev}_{pid}`, or msProbe's `{pid}`)."""
    info = root / "atb_dump_data" / "info"
    (info / "layer" / folder).mkdir(parents=True)
    (info / "model" / folder).mkdir(parents=True)
    nodes = []
    for gid in (1, 2, 3):
        n = f"Layer_{gid}"
        layer = {"opName": n, "opType": "Layer", "inTensors": [f"{n}_input_0"],
                 "outTensors": [f"{n}_output_0"], "nodes": [
                     {"opName": f"Norm_{gid}_0", "inTensors": [f"{n}_input_0"],
                      "outTensors": [f"{n}_internal_0"]},
                     {"opName": f"Linear_{gid}_1", "inTensors": [f"{n}_internal_0"],
                      "outTensors": [f"{n}_internal_1"]},
                     {"opName": f"Add_{gid}_2", "inTensors": [f"{n}_internal_1", f"{n}_input_0"],
                      "outTensors": [f"{n}_output_0"]}]}
        (info / "layer" / folder / f"{n}.json").write_text(json.dumps(layer))
        nodes.append({"opName": n, "inTensors": [f"M_internal_{gid - 1}" if gid > 1
                                                 else "M_input_0"],
                      "outTensors": [f"M_internal_{gid}"]})
    (info / "model" / folder / "M.json").write_text(json.dumps({"modelName": "M",
                                                                "nodes": nodes}))
