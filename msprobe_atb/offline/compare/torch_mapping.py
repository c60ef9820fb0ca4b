"""The mapping file of a compare against a torch golden (`compare --mapping FILE`,
`--write-mapping FILE`): per ATB tensor, the torch tensor(s) it is compared with, for
models torch_align.py's heuristics do not align (or align wrongly).

    version: 1
    heuristics: true          # tensors no rule matches keep the heuristics' pairing
    rules:
      - atb: "*_Prefill_layer/1_LinearOperation"   # glob over the op path
        io: output                                  # input | output
        index: 0                                    # the tensor's leading index
        torch:                                      # "MODULE IO INDEX", several: concat
          - model.layers.{layer}.self_attn.q_proj output 0
          - model.layers.{layer}.self_attn.k_proj output 0
          - model.layers.{layer}.self_attn.v_proj output 0
        rows: false              # cut to ATB's lm_head_indices rows (the LM head)
      - atb: "*_Prefill_layer/9_LinearOperation"   # ATB's gate alone, torch's fused
        io: output                                  # gate_up_proj: its first 128 columns
        index: 0
        torch: [model.layers.{layer}.mlp.gate_up_proj output 0]
        cols: [0, 128]           # last-axis columns [start, stop) of the torch tensor
      - atb: "*_Prefill_layer/3_RopeOperation"
        io: output
        index: 0
        torch: []                # no torch counterpart, said with `why`
        why: the rotation happens inside self_attn

`atb` is matched (fnmatch) against the op path `{id}_{Name}/{id}_{Name}/...`;
`{layer}` in a torch name is the ordinal of the ATB top-level op among the top-level
ops of its name in the same execution (the second `Prefill_layer` is layer 1). The
first rule that matches a tensor decides it; the golden is then built as for the
heuristics (concatenated on the last axis, cut to columns and rows, reshaped to the ATB
shape).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import polars as pl

from ..read.table import op_path
from .torch_align import Alignment, Source, TorchRef, Unmatched, lead

HEADER = ("# msprobe-atb compare --mapping: ATB tensor -> torch tensor(s); see "
          "docs/torch_golden.md.\n# Edit a rule to change that pair; `torch: []` leaves "
          "a tensor unmatched.\n")


class MappingError(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    atb: str
    io: str
    index: int
    torch: tuple[str, ...]
    rows: bool = False
    why: str = ""
    cols: tuple[int, int] | None = None

    def source(self, layer: int | None, number: int) -> Source | Unmatched:
        if not self.torch:
            return Unmatched(f"mapping rule {number}: {self.why or 'no torch counterpart'}")
        refs = []
        for t in self.torch:
            name = t.replace("{layer}", str(layer) if layer is not None else "{layer}")
            module, io, index = name.rsplit(" ", 2)
            refs.append(TorchRef(module, io, int(index)))
        return Source(tuple(refs), f"mapping rule {number}" + (f": {self.why}" if self.why
                                                               else ""), self.rows, self.cols)


@dataclass
class Mapping:
    rules: list[Rule]
    heuristics: bool = True


def _short(v) -> str:
    """A value as a one-line message shows it: its repr, at most 80 characters."""
    text = " ".join(repr(v).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _rule(obj, n: int, path: str) -> Rule:
    if not isinstance(obj, dict):
        raise MappingError(f"{path}: rule {n} is not a mapping (atb, io, index, torch)")
    try:
        atb, io, index = str(obj["atb"]), str(obj["io"]), int(obj["index"])
    except (KeyError, TypeError, ValueError) as e:
        raise MappingError(f"{path}: rule {n} needs atb, io and index ({_short(e)})") from None
    if io not in ("input", "output"):
        raise MappingError(f"{path}: rule {n}: io {_short(io)} is neither input nor output")
    torch = obj.get("torch") or []
    if isinstance(torch, str):
        torch = [torch]
    for t in torch:
        if not re.fullmatch(r"\S+ (input|output) \d+", str(t)):
            raise MappingError(f"{path}: rule {n}: torch tensor {_short(t)} is not "
                               "'MODULE input|output INDEX'")
    cols = obj.get("cols")
    if cols is not None and not (isinstance(cols, list) and len(cols) == 2 and all(
            isinstance(c, int) and c >= 0 for c in cols) and cols[0] < cols[1]):
        raise MappingError(f"{path}: rule {n}: cols {_short(cols)} is not [start, stop] with "
                           "0 <= start < stop")
    return Rule(atb, io, index, tuple(str(t) for t in torch), bool(obj.get("rows", False)),
                str(obj.get("why") or ""), tuple(cols) if cols else None)


# A rule is about ten nodes and 150 bytes: room for tens of thousands of rules.
MAX_MAPPING_BYTES, MAX_MAPPING_NODES = 4 << 20, 200_000


def read_mapping(path: str | Path) -> Mapping:
    # here: every compare imports this module, few read a mapping file (yaml)
    from ..read.yamldoc import YamlRefused, load_yaml

    try:
        doc = load_yaml(path, "a mapping file", MAX_MAPPING_BYTES, MAX_MAPPING_NODES)
    except YamlRefused as e:
        raise MappingError(str(e)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
        raise MappingError(f"{path}: not a mapping file (a `rules:` list is needed)")
    return Mapping([_rule(r, i + 1, str(path)) for i, r in enumerate(doc["rules"])],
                   bool(doc.get("heuristics", True)))


def _with_paths(t: pl.DataFrame) -> pl.DataFrame:
    """The primary rows of `t` with `_path` (the op path) and `_layer` (the top-level
    op's ordinal among those of its name in its execution)."""
    top_id = pl.col("op_id").str.split("_").list.first().cast(pl.Int64, strict=False)
    top_name = pl.col("op_name").str.split("/").list.first()
    prim = t.filter(pl.col("primary")).with_columns(top_id.alias("_tid"),
                                                     top_name.alias("_tname"))
    ranks = (prim.select("dev_pid", "round", "model", "_tname", "_tid").unique()
             .with_columns(pl.col("_tid").rank("dense").over(
                 "dev_pid", "round", "model", "_tname").cast(pl.Int64).sub(1).alias("_layer")))
    prim = prim.join(ranks, on=["dev_pid", "round", "model", "_tname", "_tid"], how="left",
                     nulls_equal=True)
    paths = [op_path(i, n) for i, n in prim.select("op_id", "op_name").iter_rows()]
    return prim.with_columns(pl.Series("_path", paths, pl.Utf8))


def apply_mapping(m: Mapping, t: pl.DataFrame, al: Alignment) -> None:
    """Overrides `al` where a rule matches (`t`: the target table with `_row`)."""
    for row, path, io, index, layer in _with_paths(t).select(
            "_row", "_path", "io", "index", "_layer").iter_rows():
        k = lead(index)
        hit = next(((n, r) for n, r in enumerate(m.rules, 1)
                    if r.io == io and r.index == k and fnmatchcase(path, r.atb)), None)
        if hit is None:
            if not m.heuristics:
                al.sources.pop(row, None)
                al.unmatched[row] = Unmatched("no mapping rule (heuristics: false)")
            continue
        n, rule = hit
        res = rule.source(layer, n)
        al.sources.pop(row, None)
        al.unmatched.pop(row, None)
        if isinstance(res, Source):
            al.sources[row] = res
        else:
            al.unmatched[row] = res
        al.by_rule.add(row)


def inferred_mapping(t: pl.DataFrame, al: Alignment) -> str:
    """The alignment `al` of the target table `t` as a mapping file, one rule per
    distinct (op path without its top-level id, io, index), layer numbers as {layer}."""
    rules: dict[tuple[str, str, int], dict] = {}
    for row, path, io, index, layer in _with_paths(t).select(
            "_row", "_path", "io", "index", "_layer").iter_rows():
        k = lead(index)
        path = re.sub(r"^\d+_", "*_", path)  # any top-level op of this name
        if k is None or (path, io, k) in rules:
            continue
        src = al.sources.get(row)
        rule: dict = {"atb": path, "io": io, "index": k}
        if src is None:
            rule["torch"] = []
            rule["why"] = al.unmatched[row].why if row in al.unmatched else "not aligned"
        else:
            rule["torch"] = [re.sub(rf"\.(layers|h|blocks)\.{layer}(?=[.\s]|$)",
                                    r".\1.{layer}", r.text()) if layer is not None
                             else r.text() for r in src.refs]
            if src.rows:
                rule["rows"] = True
            if src.cols:
                rule["cols"] = list(src.cols)
            rule["why"] = src.how
        rules[(path, io, k)] = rule
    import yaml
    body = yaml.safe_dump({"version": 1, "heuristics": True, "rules": list(rules.values())},
                          sort_keys=False, allow_unicode=True, width=100)
    return HEADER + body
