"""`compare` (and `report --golden`) against a golden dumped from PyTorch
(msprobe_atb.torch.Dumper): the torch tensors are aligned with the ATB dump's by
structure (torch_align.py, or a mapping file: torch_mapping.py), each ATB tensor's
golden is built from them (concatenated, cut to the selected rows, reshaped to the
ATB shape) and written as a `.bin` under a work directory, and the ordinary compare
then runs on these pairs: the same metrics, verdicts, tolerances (of the target's
dtype), outputs and report. The result rows name the torch module each ATB tensor
was compared with (`golden_module`) and how (`alignment`), `golden_path` the torch
file; ATB tensors without a torch counterpart are `target-only`, torch tensors no
ATB tensor uses are `golden-only` rows named by their module, each with why.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..read.layout import DumpLayout
from ..read.table import Dump
from ..read.tensorstats import tensor_stats
from ..read.torch_dump import torch_table
from .dumps import RESULT_COLUMNS, CompareResult, compare_dumps, pair_processes
from .torch_align import KERNEL_NOTE, Alignment, align
from .torch_build import NUMPY_DTYPES, Builder
from .torch_mapping import Mapping, apply_mapping, inferred_mapping


@dataclass
class TorchAlignment:
    """What compare prints of the alignment, and the rows it adds."""

    paired: int = 0  # ATB tensors given a torch golden
    by_rule: int = 0  # of those, by the mapping file
    hows: dict[str, int] = field(default_factory=dict)  # how -> pairs
    atb_unmatched: dict[str, int] = field(default_factory=dict)  # why -> ATB tensors
    # torch tensors no ATB tensor uses: golden-only result rows (RESULT_COLUMNS keys)
    torch_unmatched: list[dict] = field(default_factory=list)
    aligned_modules: set[str] = field(default_factory=set)  # with a tensor aligned
    notes: list[str] = field(default_factory=list)
    golden: Dump | None = None  # the aligned golden (the report's overlay)
    # ATB tensor file -> its golden as compared (while torch_compare's block lasts)
    aligned_files: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"Aligned with the torch golden: {self.paired} ATB tensors"
               + (f" ({self.by_rule} by the mapping file)" if self.by_rule else "")]
        out += [f"  {n:5d}  {how}" for how, n in sorted(self.hows.items(),
                                                       key=lambda kv: -kv[1])[:12]]
        if len(self.hows) > 12:
            out.append(f"  ... and {len(self.hows) - 12} more kinds (the `alignment` column)")
        n = sum(self.atb_unmatched.values())
        out.append(f"ATB tensors with no torch counterpart: {n}")
        out += [f"  {k:5d}  {why}" for why, k in sorted(self.atb_unmatched.items(),
                                                       key=lambda kv: -kv[1])]
        alone = self.modules_alone()
        out.append(f"torch modules with no ATB counterpart: {len(alone)}"
                   + (" (none of their tensors is aligned)" if alone else ""))
        out += [f"  {m}" for m in alone[:10]]
        if len(alone) > 10:
            out.append(f"  ... and {len(alone) - 10} more (golden-only rows)")
        rest = sum(1 for t in self.torch_unmatched if t["op"] in self.aligned_modules)
        if rest:
            out.append(f"  and {rest} other tensors of aligned modules no ATB tensor is "
                       "compared with (arguments such as positions and masks, or the same "
                       "tensor as another module's): golden-only rows")
        out += [f"  note: {n}" for n in self.notes]
        return out

    def modules_alone(self) -> list[str]:
        """The torch modules none of whose tensors is aligned, in dump order."""
        return list(dict.fromkeys(t["op"] for t in self.torch_unmatched
                                  if t["op"] not in self.aligned_modules))

    def as_dict(self) -> dict:
        return {"paired": self.paired, "by_mapping_file": self.by_rule, "how": self.hows,
                "atb_unmatched": self.atb_unmatched,
                "torch_modules_unmatched": self.modules_alone(),
                "torch_unmatched": [t["golden_module"] for t in self.torch_unmatched],
                "notes": self.notes}


def aligned_golden(torch: Dump, target: Dump, work: Path, mapping: Mapping | None = None,
                   write_mapping: Path | None = None
                   ) -> tuple[Dump, pl.DataFrame, TorchAlignment]:
    """The golden Dump of the ATB tensors that have a torch counterpart (same keys as
    the target's), with its files under `work`; a table of what each target row was
    aligned with (for the result rows); and the summary. `write_mapping`: the file
    that gets the alignment used, as a mapping file to edit."""
    tt = torch_table(torch)
    unnamed = [] if tt.height or not torch.tensors.height else [
        "the torch dump names no module for its ops (info/layer/{dev}_{pid}/*.json missing "
        "or unreadable: `msprobe-atb rebuild` writes them again from the record log)"]
    t = target.tensors.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))
    pairs, _ = pair_processes(tt.rename({"call": "round"}).with_columns(
        pl.col("dev_pid").map_elements(_device, return_dtype=pl.Int64).alias("device")), t)
    al: Alignment = align(t, tt, pairs)
    if mapping is not None:
        apply_mapping(mapping, t, al)
    if write_mapping is not None:
        write_mapping.write_text(inferred_mapping(t, al), encoding="utf-8")
    b = Builder(tt, t, work)
    # (processes without a counterpart: the compare of the aligned golden says so)
    summary = TorchAlignment(notes=[*unnamed, *al.notes])
    golden_rows, info_rows, used = [], [], set()
    rows = t.filter(pl.col("_row").is_in(list(al.sources)) | pl.col("_row").is_in(
        list(al.unmatched)))
    for r in rows.iter_rows(named=True):
        row = r["_row"]
        ex = al.executions.get((r["dev_pid"], r["model"], r["round"]))
        src = al.sources.get(row)
        if src is None or ex is None:
            why = al.unmatched[row].why if row in al.unmatched else \
                "no torch forward call for this execution"
            summary.atb_unmatched[why] = summary.atb_unmatched.get(why, 0) + 1
            info_rows.append({"_row": row, "golden_module": None, "alignment": None,
                              "why": why, "torch_path": None})
            continue
        tp, call = ex
        f, arr, steps, problem = b.build(tp, call, src, r["shape"] or "", r["dev_pid"],
                                    r["round"], r["model"], f"{r['op_id']}_{r['io']}{r['index']}")
        how = src.how + (f" ({steps})" if steps else "")
        if f is None or arr is None:
            summary.atb_unmatched[problem] = summary.atb_unmatched.get(problem, 0) + 1
            info_rows.append({"_row": row, "golden_module": src.text(), "alignment": how,
                              "why": problem, "torch_path": None})
            continue
        used.update((tp, call, ref.module, ref.io, ref.index) for ref in src.refs)
        summary.aligned_modules.update(ref.module for ref in src.refs)
        summary.paired += 1
        summary.by_rule += row in al.by_rule
        kind = src.how.split(":")[0].replace(KERNEL_NOTE, "")
        summary.hows[kind] = summary.hows.get(kind, 0) + 1
        if r["path"]:
            summary.aligned_files[r["path"]] = str(f)
        golden_rows.append(_golden_row(r, tp, arr, f))
        info_rows.append({"_row": row, "golden_module": src.text(), "alignment": how,
                          "why": None, "torch_path": b.paths(tp, call, src)[0]})
    summary.torch_unmatched = _torch_unmatched(tt, used, al)
    schema = target.tensors.schema
    golden = pl.DataFrame(golden_rows, schema={k: schema[k] for k in schema
                                               if k not in ("abs_max", "nonfinite")},
                          strict=False).with_columns(
        pl.max_horizontal(pl.col("max").abs(), pl.col("min").abs()).alias("abs_max"),
        (pl.col("nan") + pl.col("pinf") + pl.col("ninf") > 0).alias("nonfinite"),
    ).select(list(schema))
    # no info/: the golden has the target's ops, so nothing of its own to check
    layout = DumpLayout(given=torch.layout.given, root=None, rounds=target.layout.rounds)
    info = pl.DataFrame(info_rows, schema={"_row": pl.Int64, "golden_module": pl.Utf8,
                                           "alignment": pl.Utf8, "why": pl.Utf8,
                                           "torch_path": pl.Utf8})
    return Dump(layout, golden, list(torch.problems)), info, summary


GOLDEN_KEEPS = ("round", "seq", "op_id", "op_name", "op_type", "layer", "io", "index",
                "stage", "primary", "key", "model", "seq_exact")  # the target row's


def _golden_row(r: dict, tp: str, arr, f: Path) -> dict:
    """The aligned golden's table row for target row `r`: its keys, the golden's
    process, values `arr` and file `f`."""
    st = tensor_stats(arr)
    return {**{k: r[k] for k in GOLDEN_KEEPS},
            "dev_pid": tp, "device": _device(tp), "pid": None,
            "dtype": NUMPY_DTYPES[arr.dtype.name], "format": "nd",
            "shape": "x".join(map(str, arr.shape)), "path": str(f), "status": "bin",
            "note": None, "round_dir": str(f.parent), "source": "torch", "stat_step": 0.0,
            **{k: st.get(k) for k in ("count", "max", "min", "mean", "norm", "nan", "pinf",
                                      "ninf", "zero")}}


def _torch_unmatched(tt: pl.DataFrame, used: set, al: Alignment) -> list[dict]:
    """Golden-only result rows for the torch tensors no ATB tensor was aligned with."""
    atb_of = {v: k for k, v in al.executions.items()}  # (torch pid, call) -> ATB execution
    out = []
    for d, c, m, io, i, p, seq in tt.select("dev_pid", "call", "module", "io", "index",
                                            "path", "seq").iter_rows():
        if (d, c, m, io, i) in used:
            continue
        ap, _, rnd = atb_of.get((d, c), (None, None, None))
        out.append({
            "verdict": "golden-only", "mode": "-", "golden_process": d, "target_process": ap,
            "round": rnd, "op": m, "io": io, "index": str(i), "primary": True,
            "golden_module": f"{m} {io} {i}", "golden_path": p, "golden_seq": seq, "_call": c,
            "alignment": "a torch tensor no ATB tensor was aligned with",
            "reason": "no ATB counterpart" + ("" if ap else " (no ATB execution for this "
                                              "forward call)")})
    return out


def _device(dev_pid: str) -> int | None:
    head = dev_pid.partition("_")[0]
    return int(head) if head.lstrip("-").isdigit() else None


@contextmanager
def torch_compare(torch: Dump, target: Dump, *, mapping: Mapping | None = None,
                  write_mapping: Path | None = None, work_dir: str | None = None,
                  **kw) -> Iterator[CompareResult]:
    """compare_dumps of `target` against the torch dump `torch`, aligned; the golden
    files live in a temporary directory (under `work_dir`) until the block ends."""
    with tempfile.TemporaryDirectory(prefix="msprobe-atb-torch-golden-", dir=work_dir) as w:
        golden, info, summary = aligned_golden(torch, target, Path(w), mapping,
                                               write_mapping)
        res = compare_dumps(golden, target, **kw)
        res.rows = _annotated(res.rows, target, info, summary)
        summary.golden = golden
        res.torch_alignment = summary
        yield res


def _annotated(rows: pl.DataFrame, target: Dump, info: pl.DataFrame,
               summary: TorchAlignment) -> pl.DataFrame:
    """The result rows with the torch module and the alignment of each, torch file
    paths, why an ATB tensor has no torch golden, and the torch-only tensors."""
    keys = ["dev_pid", "round", "op_id", "stage", "io", "index"]
    t = target.tensors.with_row_index("_row").select(
        pl.col("_row").cast(pl.Int64), *keys).join(info, on="_row")
    rk = ["target_process", "round", "op_id", "stage", "io", "index"]
    out = rows.drop("golden_module", "alignment").join(
        t.rename(dict(zip(keys, rk))).drop("_row"), on=rk, how="left", nulls_equal=True,
        maintain_order="left")
    out = out.with_columns(
        pl.when(pl.col("torch_path").is_not_null()).then(pl.col("torch_path"))
        .otherwise(pl.col("golden_path")).alias("golden_path"),
        pl.when((pl.col("verdict") == "target-only") & pl.col("why").is_not_null())
        .then(pl.lit("no torch golden: ") + pl.col("why")).otherwise(pl.col("reason"))
        .alias("reason"))
    extra = [{k: v for k, v in t.items() if k != "_call"} for t in summary.torch_unmatched]
    out = out.select(RESULT_COLUMNS)
    if extra:
        out = pl.concat([out, pl.DataFrame(extra, schema={k: out.schema[k] for k in
                                                          extra[0]})], how="diagonal_relaxed")
    return out
