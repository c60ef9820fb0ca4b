"""Which torch tensor each tensor of an ATB dump is compared with (`compare` against a
golden dumped from PyTorch; docs/torch_golden.md). Only the tables are used here:
torch_golden.py reads the files, applies the transforms and runs the compare.

The heuristics, for a decoder-only Hugging Face model (Llama and its kin) against its
ATB model:
* Executions: the n-th execution of an ATB model of a process (prefill or decode, in
  dump order) pairs with the n-th forward call of the top torch module (prefill =
  call 0, decode step k = call k+1, whatever the number of requests).
* Top-level ops, in order: the ops that hold an attention op are the decoder layers
  (without child ops in the dump: the top-level op whose name repeats), the k-th with
  torch `*.layers.k`; the op before the first layer is the embedding
  (`embed_tokens`); the op after the last is the LM head (final norm and `lm_head`).
* Within a layer, child ops by role, from their op types in order: the first norm is
  `input_layernorm`, the second `post_attention_layernorm`; one Linear before the
  attention is the fused QKV (torch: q_proj|k_proj|v_proj outputs concatenated on
  the last axis), three are q, k, v; a Split after it gives q, k, v; Rope and
  ReshapeAndCache have no torch module (counted unmatched; Rope's cos/sin inputs are
  `rotary_emb`'s outputs); the attention op's output is `self_attn.o_proj`'s input
  (torch has no module for core attention); the Linear after it is o_proj; the add
  after it gives `post_attention_layernorm`'s input; one Linear after the post norm
  is the fused gate-up (gate_proj|up_proj, gate first as ATB's SwiGLU takes it), two
  are gate and up; a SwiGLU (an activation whose input is twice its output wide) gives
  `act_fn(gate) * up`, which is `mlp.down_proj`'s input (other activations: `act_fn`'s
  output, and a Mul after them down_proj's input); the Linear after it is down_proj;
  the last add gives the layer's output (the next layer's input, or `norm`'s).
* Kernels of an op pair as their op, tensor by tensor (by leading index).
* The LM head: a Gather selects the rows of `lm_head_indices`; the norm and the Linear
  after it are `norm` and `lm_head`, whose torch tensors (all positions) are cut to
  those rows (Source.rows).
* Tensors compare flattened to [tokens, last axis] and reshaped to the ATB shape when
  the element counts agree; a shape that still differs fails the pair (never a pass).
ATB tensors that none of this covers (weights, caches, indices, rotated q/k) and torch
tensors that no ATB tensor uses are listed unmatched, with why.

A mapping file (torch_mapping.py) overrides these per tensor.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True)
class TorchRef:
    """One torch tensor: input/output `index` of the module `module` (qualified name)."""

    module: str
    io: str
    index: int

    def text(self) -> str:
        return f"{self.module} {self.io} {self.index}"


@dataclass(frozen=True)
class Source:
    """The golden of one ATB tensor: the torch tensors `refs` (concatenated on the
    last axis when several), cut to ATB's selected token rows when `rows`, to the
    last-axis columns [start, stop) when `cols` (a mapping file's: a part of a torch
    tensor), then reshaped to the ATB shape. `how` says why (the role)."""

    refs: tuple[TorchRef, ...]
    how: str
    rows: bool = False
    cols: tuple[int, int] | None = None

    def text(self) -> str:
        names = " | ".join(r.text() for r in self.refs)
        text = f"concat({names})" if len(self.refs) > 1 else names
        if self.cols:
            text += f" [..., {self.cols[0]}:{self.cols[1]}]"
        return text + (" [rows of lm_head_indices]" if self.rows else "")


@dataclass
class Unmatched:
    why: str


@dataclass
class Alignment:
    """Per ATB tensor (target table row number) its Source or why it has none; the
    torch tensors no ATB tensor uses; notes on what could not be paired."""

    sources: dict[int, Source] = field(default_factory=dict)
    unmatched: dict[int, Unmatched] = field(default_factory=dict)
    # (torch dev_pid, call) of each ATB (dev_pid, model, round) execution
    executions: dict[tuple[str, str, int], tuple[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    by_rule: set[int] = field(default_factory=set)  # rows a mapping file decided


KERNEL_NOTE = " (a kernel of the op)"
LAYER = re.compile(r"^(?P<prefix>.*\.)?(?:layers|h|blocks)\.(?P<n>\d+)$")
ATTENTION = re.compile(r"(?i)attention")
NORM = re.compile(r"(?i)norm")
LINEAR = re.compile(r"(?i)linear|matmul")
ADD_OR_MUL = re.compile(r"(?i)^(elewise|add|mul)")
ROPE = re.compile(r"(?i)^(rope|rotary)")
ACTIVATION = re.compile(r"(?i)^(activation|swiglu|silu|gelu)")


def lead(index: str | None) -> int | None:
    """The tensor index's leading number ('1_gamma' -> 1)."""
    m = re.match(r"^(\d+)", index or "")
    return int(m.group(1)) if m else None


@dataclass
class TorchNames:
    """The torch modules of a Llama-like model, by role."""

    layers: list[str]
    embed: str | None
    norm: str | None
    lm_head: str | None
    rotary: str | None

    @classmethod
    def of(cls, modules: set[str]) -> TorchNames:
        layers = sorted(((int(m.group("n")), name) for name in modules
                         if (m := LAYER.match(name))), key=lambda x: x[0])
        prefix = LAYER.match(layers[0][1]).group("prefix") or "" if layers else ""

        def find(*tails: str) -> str | None:
            for t in tails:
                hits = sorted(n for n in modules if n == prefix + t or n.endswith("." + t)
                              or n == t)
                if hits:
                    return hits[0]
            return None

        return cls([n for _, n in layers], find("embed_tokens", "wte", "word_embeddings"),
                   find("norm", "final_layernorm", "ln_f"), find("lm_head"),
                   find("rotary_emb"))


def _refs(*names: tuple[str, str, int]) -> tuple[TorchRef, ...]:
    return tuple(TorchRef(m, io, i) for m, io, i in names)


class LayerRoles:
    """The torch golden of each tensor of one ATB decoder layer's child ops."""

    def __init__(self, kids: list[tuple[str, str]], layer: str, rotary: str | None):
        """`kids`: (child id, op type) of the layer's direct children, in order;
        `layer`: the torch layer's qualified name."""
        self.layer, self.rotary = layer, rotary
        self.roles: dict[str, str] = {}  # child id -> role
        attn = next((i for i, (_, t) in enumerate(kids) if ATTENTION.search(t)), len(kids))
        norms = [i for i, (_, t) in enumerate(kids) if NORM.search(t)]
        post = norms[1] if len(norms) > 1 else len(kids)
        act = next((i for i, (_, t) in enumerate(kids) if i > post and
                    ACTIVATION.search(t)), len(kids))

        def linears(lo: int, hi: int) -> list[int]:
            return [i for i in range(lo, hi) if LINEAR.search(kids[i][1])]

        def put(i: int, role: str) -> None:
            self.roles[kids[i][0]] = role

        if norms:
            put(norms[0], "input_norm")
        if len(norms) > 1:
            put(post, "post_norm")
        qkv = linears(0, attn)
        if len(qkv) == 1:
            put(qkv[0], "qkv")
        elif len(qkv) == 3:
            for i, r in zip(qkv, ("q", "k", "v")):
                put(i, r)
        for i, (_, t) in enumerate(kids):
            if i < attn and re.search(r"(?i)split", t) and qkv:
                put(i, "split_qkv")
            elif ROPE.search(t):
                put(i, "rope")
            elif re.search(r"(?i)cache", t):
                put(i, "cache")
        if attn < len(kids):
            put(attn, "attention")
        o = linears(attn + 1, post)
        if o:
            put(o[0], "o_proj")
        adds = [i for i in range(o[0] + 1 if o else attn + 1, post)
                if ADD_OR_MUL.search(kids[i][1])]
        if adds:
            put(adds[0], "attn_add")
        up = linears(post + 1, act)
        if len(up) == 1:
            put(up[0], "gate_up")
        elif len(up) == 2:
            put(up[0], "gate")
            put(up[1], "up")
        for i in range(post + 1, act):
            if re.search(r"(?i)split", kids[i][1]) and len(up) == 1:
                put(i, "split_gate_up")
        if act < len(kids):
            put(act, "activation")
        down = linears(act + 1, len(kids))
        if down:
            put(down[0], "down")
            muls = [i for i in range(act + 1, down[0]) if ADD_OR_MUL.search(kids[i][1])]
            if muls:
                put(muls[0], "act_mul")
        tail = [i for i in range((down[0] if down else act) + 1, len(kids))
                if ADD_OR_MUL.search(kids[i][1])]
        if tail:
            put(tail[-1], "mlp_add")

    def source(self, role: str, io: str, k: int, swiglu: bool) -> Source | Unmatched:
        L = self.layer
        a, m = f"{L}.self_attn", f"{L}.mlp"
        q, kk, v = (f"{a}.{p}_proj" for p in "qkv")
        gate, up, down = f"{m}.gate_proj", f"{m}.up_proj", f"{m}.down_proj"
        table: dict[tuple[str, str, int], tuple[tuple[TorchRef, ...], str]] = {
            ("input_norm", "input", 0): (_refs((f"{L}.input_layernorm", "input", 0)), ""),
            ("input_norm", "output", 0): (_refs((f"{L}.input_layernorm", "output", 0)), ""),
            ("qkv", "input", 0): (_refs((q, "input", 0)), ""),
            ("qkv", "output", 0): (_refs((q, "output", 0), (kk, "output", 0),
                                         (v, "output", 0)), "fused QKV Linear"),
            ("q", "input", 0): (_refs((q, "input", 0)), ""),
            ("q", "output", 0): (_refs((q, "output", 0)), ""),
            ("k", "input", 0): (_refs((kk, "input", 0)), ""),
            ("k", "output", 0): (_refs((kk, "output", 0)), ""),
            ("v", "input", 0): (_refs((v, "input", 0)), ""),
            ("v", "output", 0): (_refs((v, "output", 0)), ""),
            ("split_qkv", "input", 0): (_refs((q, "output", 0), (kk, "output", 0),
                                              (v, "output", 0)), "fused QKV"),
            ("split_qkv", "output", 0): (_refs((q, "output", 0)), "q of the split QKV"),
            ("split_qkv", "output", 1): (_refs((kk, "output", 0)), "k of the split QKV"),
            ("split_qkv", "output", 2): (_refs((v, "output", 0)), "v of the split QKV"),
            ("rope", "input", 0): (_refs((q, "output", 0)), "q before rotation"),
            ("rope", "input", 1): (_refs((kk, "output", 0)), "k before rotation"),
            ("attention", "output", 0): (_refs((f"{a}.o_proj", "input", 0)),
                                         "core attention: torch has no module for it, its "
                                         "output is o_proj's input"),
            ("o_proj", "input", 0): (_refs((f"{a}.o_proj", "input", 0)), ""),
            ("o_proj", "output", 0): (_refs((f"{a}.o_proj", "output", 0)), ""),
            ("attn_add", "input", 0): (_refs((L, "input", 0)), "residual: the layer's input"),
            ("attn_add", "input", 1): (_refs((f"{a}.o_proj", "output", 0)), ""),
            ("attn_add", "output", 0): (_refs((f"{L}.post_attention_layernorm", "input", 0)),
                                        "residual add: post_attention_layernorm's input"),
            ("post_norm", "input", 0): (_refs((f"{L}.post_attention_layernorm", "input", 0)),
                                        ""),
            ("post_norm", "output", 0): (_refs((f"{L}.post_attention_layernorm", "output",
                                                0)), ""),
            ("gate_up", "input", 0): (_refs((gate, "input", 0)), ""),
            ("gate_up", "output", 0): (_refs((gate, "output", 0), (up, "output", 0)),
                                       "fused gate-up Linear (gate first)"),
            ("split_gate_up", "input", 0): (_refs((gate, "output", 0), (up, "output", 0)),
                                            "fused gate-up"),
            ("split_gate_up", "output", 0): (_refs((gate, "output", 0)), ""),
            ("split_gate_up", "output", 1): (_refs((up, "output", 0)), ""),
            ("gate", "input", 0): (_refs((gate, "input", 0)), ""),
            ("gate", "output", 0): (_refs((gate, "output", 0)), ""),
            ("up", "input", 0): (_refs((up, "input", 0)), ""),
            ("up", "output", 0): (_refs((up, "output", 0)), ""),
            ("act_mul", "input", 0): (_refs((f"{m}.act_fn", "output", 0)), ""),
            ("act_mul", "input", 1): (_refs((up, "output", 0)), ""),
            ("act_mul", "output", 0): (_refs((down, "input", 0)), "act_fn(gate) * up: "
                                       "down_proj's input"),
            ("down", "input", 0): (_refs((down, "input", 0)), ""),
            ("down", "output", 0): (_refs((down, "output", 0)), ""),
            ("mlp_add", "input", 0): (_refs((f"{L}.post_attention_layernorm", "input", 0)),
                                      "residual: post_attention_layernorm's input"),
            ("mlp_add", "input", 1): (_refs((down, "output", 0)), ""),
            ("mlp_add", "output", 0): (_refs((L, "output", 0)), "residual add: the layer's "
                                       "output"),
        }
        if role == "activation":
            if swiglu:
                table[("activation", "input", 0)] = (
                    _refs((gate, "output", 0), (up, "output", 0)), "SwiGLU input: gate | up")
                table[("activation", "output", 0)] = (
                    _refs((down, "input", 0)), "SwiGLU = act_fn(gate) * up: down_proj's input")
            else:
                table[("activation", "input", 0)] = (_refs((gate, "output", 0)), "")
                table[("activation", "output", 0)] = (_refs((f"{m}.act_fn", "output", 0)), "")
        if role == "rope" and io == "input" and k in (2, 3) and self.rotary:
            table_name = "cos" if k == 2 else "sin"
            return Source(_refs((self.rotary, "output", k - 2)),
                          f"rope {table_name} table: rotary_emb's output")
        hit = table.get((role, io, k))
        if hit is None:
            return Unmatched(_UNMATCHED.get(role, f"{role}: no torch tensor for {io} {k}")
                             if io == "output" or role in _UNMATCHED else PARAMETER)
        refs, how = hit
        return Source(refs, f"layer role {role}" + (f": {how}" if how else ""))


PARAMETER = ("a weight, cache, rotary table or index (torch dumps module inputs and outputs, "
             "not parameters)")
_UNMATCHED = {
    "rope": "Rope: torch applies the rotation inside self_attn, no module holds its result",
    "cache": "ReshapeAndCache: the KV cache has no torch module",
    "attention": "core attention: torch has no module for it (only its output is o_proj's "
                 "input)",
}


def _top_ops(ex: pl.DataFrame) -> list[str]:
    """The top-level op ids of one execution, in execution order."""
    top = ex.with_columns(pl.col("op_id").str.split("_").list.first().alias("_top"))
    return top.group_by("_top").agg(pl.col("seq").min()).sort("seq").get_column(
        "_top").to_list()


def _children_of(ex: pl.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """Op id -> (child id, op type) of its direct children, by child number."""
    kids: dict[str, list[tuple[int, str, str]]] = {}
    for op_id, typ in ex.select("op_id", "op_type").unique("op_id").iter_rows():
        parent, _, n = op_id.rpartition("_")
        if parent and n.isdigit():
            kids.setdefault(parent, []).append((int(n), op_id, typ or ""))
    return {p: [(i, t) for _, i, t in sorted(v)] for p, v in kids.items()}


def _is_swiglu(ex: pl.DataFrame, op_id: str) -> bool:
    """An activation whose input is twice its output wide (gate | up in, one out)."""
    def width(io: str) -> int | None:
        s = ex.filter((pl.col("op_id") == op_id) & (pl.col("io") == io)
                      & pl.col("primary")).get_column("shape").to_list()
        return int(s[0].split("x")[-1]) if s and s[0] else None
    wi, wo = width("input"), width("output")
    return wi is not None and wo is not None and wi == 2 * wo


def _head_source(role: str, io: str, k: int, n: TorchNames) -> Source | Unmatched:
    if role == "gather":
        if io == "input" and k == 0 and n.norm:
            return Source(_refs((n.norm, "input", 0)), "LM head: the last layer's output")
        if io == "output" and k == 0 and n.norm:
            return Source(_refs((n.norm, "input", 0)), "LM head: the rows of "
                          "lm_head_indices", rows=True)
        return Unmatched(PARAMETER)
    refs = {("norm", "input", 0): n.norm, ("norm", "output", 0): n.norm,
            ("lm_head", "input", 0): n.lm_head, ("lm_head", "output", 0): n.lm_head,
            ("head", "output", 0): n.lm_head}
    mod = refs.get((role, io, k))
    if mod is None and role == "head" and io == "input" and k == 0 and n.norm:
        return Source(_refs((n.norm, "input", 0)), "LM head: the last layer's output")
    if mod is None:
        return Unmatched(PARAMETER)
    return Source(_refs((mod, io, 0)), f"LM head {role if role != 'head' else 'output'}",
                  rows=True)


def _embed_source(io: str, k: int, n: TorchNames) -> Source | Unmatched:
    if n.embed and io == "output" and k == 0:
        return Source(_refs((n.embed, "output", 0)), "embedding")
    if n.embed and io == "input" and k == 1:
        return Source(_refs((n.embed, "input", 0)), "embedding: the token ids")
    return Unmatched(PARAMETER)


Plan = dict[tuple[str, str, str], "Source | Unmatched"]  # (op id, io, index) -> golden


def _plan(ex: pl.DataFrame, prim: pl.DataFrame, names: TorchNames,
          notes: list[str]) -> Plan:
    """The golden of each primary tensor (op id, io, index) of one ATB execution."""
    kids = _children_of(ex)
    tops = _top_ops(ex)

    def holds_attention(op: str) -> bool:
        return any(ATTENTION.search(t) or holds_attention(c) for c, t in kids.get(op, []))

    layers = [t for t in tops if holds_attention(t)]
    if not layers:  # no child ops dumped (save_child false): the repeated top-level op
        names_of = dict(ex.select(pl.col("op_id"), pl.col("op_name"))
                        .filter(~pl.col("op_id").str.contains("_")).unique("op_id").rows())
        counts = Counter(names_of.get(t) for t in tops)
        name, n = counts.most_common(1)[0] if counts else (None, 0)
        layers = [t for t in tops if names_of.get(t) == name] if n > 1 else []
    if len(layers) != len(names.layers):
        notes.append(f"{len(layers)} ATB decoder layers against {len(names.layers)} torch "
                     "layers: the first ones are paired")
    first = tops.index(layers[0]) if layers else len(tops)
    last = tops.index(layers[-1]) if layers else -1
    kind_of = {**{t: "embed" for t in tops[:first]}, **{t: "head" for t in tops[last + 1:]}}
    layer_roles = {t: LayerRoles(kids.get(t, []), torch_layer, names.rotary)
                   for t, torch_layer in zip(layers, names.layers)}
    head_kids = {cid: ("gather" if re.search(r"(?i)gather", typ) else
                       "norm" if NORM.search(typ) else
                       "lm_head" if LINEAR.search(typ) else "other")
                 for t in tops[last + 1:] for cid, typ in kids.get(t, [])}
    plan: Plan = {}
    for op_id, io, index in prim.select("op_id", "io", "index").unique().iter_rows():
        k = lead(index)
        parts = op_id.split("_")
        if len(parts) > 2 and len(kids.get("_".join(parts[:-1]), [])) > 1:
            res: Source | Unmatched = Unmatched(
                "one of several kernels of its op: which torch tensor it holds is not known")
        elif k is None:
            res = Unmatched(f"tensor index {index!r} has no number")
        elif kind_of.get(parts[0]) == "embed":
            res = _embed_source(io, k, names)
        elif kind_of.get(parts[0]) == "head":
            role = "head" if len(parts) == 1 else head_kids.get("_".join(parts[:2]), "other")
            res = _head_source(role, io, k, names)
        elif parts[0] in layer_roles:
            res = _layer_tensor(ex, layer_roles[parts[0]], parts, io, k)
        else:
            res = Unmatched("an op outside the embedding, the decoder layers and the LM head")
        plan[(op_id, io, index)] = res
    return plan


def align_execution(ex: pl.DataFrame, names: TorchNames, al: Alignment,
                    plans: dict[tuple, Plan]) -> None:
    """Fill `al` for the primary tensors of one ATB execution `ex` (target table rows,
    with `_row` their row number). The executions of one model share their plan
    (`plans`, by their ops, tensor indices and torch names): a model's decode rounds
    are worked out once."""
    prim = ex.filter(pl.col("primary"))
    sig = (tuple(names.layers), names.embed, names.norm, names.lm_head, names.rotary,
           tuple(prim.select("op_id", "op_type", "io", "index").unique()
                 .sort("op_id", "io", "index").rows()))
    if sig not in plans:
        plans[sig] = _plan(ex, prim, names, al.notes)
    plan = plans[sig]
    for row, op_id, io, index in prim.select("_row", "op_id", "io", "index").iter_rows():
        res = plan[(op_id, io, index)]
        if isinstance(res, Source):
            al.sources[row] = res
        else:
            al.unmatched[row] = res


def _layer_tensor(ex: pl.DataFrame, roles: LayerRoles, parts: list[str], io: str,
                  k: int) -> Source | Unmatched:
    if len(parts) == 1:
        if k == 0:
            return Source(_refs((roles.layer, io, 0)), f"decoder layer {io}")
        return Unmatched(PARAMETER)
    child = "_".join(parts[:2])
    role = roles.roles.get(child)
    if role is None:
        return Unmatched("no role found for this op in the layer (see the heuristics)")
    res = roles.source(role, io, k, role == "activation" and _is_swiglu(ex, child))
    if isinstance(res, Source) and len(parts) > 2:
        return Source(res.refs, res.how + KERNEL_NOTE, res.rows)
    return res


def align(target: pl.DataFrame, torch: pl.DataFrame,
          pairs: list[tuple[str, str]]) -> Alignment:
    """The alignment of `target` (the ATB dump's table, with `_row`) with `torch`
    (torch_dump.torch_table: dev_pid, call, module, io, index, ...) for the process
    pairs `pairs` (torch dev_pid, ATB dev_pid)."""
    al = Alignment()
    plans: dict[tuple, Plan] = {}
    for tp, ap in pairs:
        calls = sorted(torch.filter(pl.col("dev_pid") == tp).get_column("call").unique()
                       .to_list())
        mine = target.filter(pl.col("dev_pid") == ap)
        execs = (mine.group_by("model", "round").agg(pl.col("seq").min())
                 .sort("seq").select("model", "round").rows())
        if len(execs) != len(calls):
            al.notes.append(f"{ap}: {len(execs)} ATB model executions against {len(calls)} "
                            f"torch forward calls of {tp}: the first ones are paired in order")
        for (model, rnd), call in zip(execs, calls):
            al.executions[(ap, model, rnd)] = (tp, call)
            names = TorchNames.of(set(torch.filter((pl.col("dev_pid") == tp)
                                                   & (pl.col("call") == call))
                                      .get_column("module").to_list()))
            ex = mine.filter(pl.col("round") == rnd).filter(
                pl.col("model").is_null() if model is None else pl.col("model") == model)
            align_execution(ex, names, al, plans)
        for (model, rnd) in execs[len(calls):]:
            for row in mine.filter((pl.col("round") == rnd) & (
                    pl.col("model").is_null() if model is None else pl.col("model") == model)
                    ).get_column("_row").to_list():
                al.unmatched[row] = Unmatched("no torch forward call for this execution")
    return al
