"""A handcrafted torch-format dump made from an ATB dump of the stand-in: each module
of Hugging Face's LlamaForCausalLM gets the tensors the ATB ops computed, in torch's
layout ([1, seq, ...], q/k/v and gate/up apart), and the final norm and lm_head over
every position (numpy, from the ATB weights), as torch computes them. Compared with
the ATB dump it came from, every aligned pair must agree: a test of the alignment
alone, needing neither the torch dumper nor a checkpoint."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parents[1] / "offline"))

from offline_synth import RoundWriter  # noqa: E402

from msprobe_atb.offline.binfile import load_bin  # noqa: E402
from msprobe_atb.offline.table import open_dump  # noqa: E402

# child numbers of each module in LlamaForCausalLM's named_children order
IDS = {"model": 0, "lm_head": 1, "embed_tokens": 0, "layers": 1, "norm": 2, "rotary_emb": 3,
       "self_attn": 0, "mlp": 1, "input_layernorm": 2, "post_attention_layernorm": 3,
       "q_proj": 0, "k_proj": 1, "v_proj": 2, "o_proj": 3, "gate_proj": 0, "up_proj": 1,
       "down_proj": 2, "act_fn": 3}


def op_path(module: str) -> str:
    segs = ["0_LlamaForCausalLM"]
    for s in module.split("."):
        segs.append(f"{s}_{s}" if s.isdigit() else f"{IDS[s]}_{s}")
    return "/".join(segs)


def _rmsnorm(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x64 = x.astype(np.float64)
    return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + eps) * w).astype(np.float32)


def torch_from_atb(atb_root: Path, out: Path, pid: int = 777) -> Path:
    dump = open_dump(atb_root)
    t = dump.tensors.filter(pl.col("primary"))
    execs = t.group_by("model", "round").agg(pl.col("seq").min()).sort("seq").rows()
    data = out / "atb_dump_data" / "data"
    for call, (model, rnd, _) in enumerate(execs):
        ex = t.filter((pl.col("model") == model) & (pl.col("round") == rnd))

        def get(op_id: str, io: str, k: int, ex: pl.DataFrame = ex) -> np.ndarray:
            p = ex.filter((pl.col("op_id") == op_id) & (pl.col("io") == io)
                          & pl.col("index").str.starts_with(str(k))).get_column("path")[0]
            return load_bin(p)

        tops = ex.with_columns(pl.col("op_id").str.split("_").list.first().alias("_t")) \
            .group_by("_t").agg(pl.col("seq").min(), pl.col("op_name").first()) \
            .sort("seq").rows()
        w = RoundWriter(data, f"0_{pid}", call, task="tensor")

        def add(module: str, io: str, k: int, a: np.ndarray, w: RoundWriter = w) -> None:
            w.add(op_path(module), io, k, a[None])  # torch's batch axis

        emb, layers, head = tops[0][0], [x[0] for x in tops[1:-1]], tops[-1][0]
        add("model.embed_tokens", "input", 0, get(emb, "input", 1))
        add("model.embed_tokens", "output", 0, get(emb, "output", 0))
        cos, sin = get(f"{layers[0]}_3", "input", 2), get(f"{layers[0]}_3", "input", 3)
        add("model.rotary_emb", "output", 0, cos)
        add("model.rotary_emb", "output", 1, sin)
        for n, lid in enumerate(layers):
            L = f"model.layers.{n}"
            add(L, "input", 0, get(lid, "input", 0))
            add(f"{L}.input_layernorm", "input", 0, get(f"{lid}_0", "input", 0))
            add(f"{L}.input_layernorm", "output", 0, get(f"{lid}_0", "output", 0))
            for k, p in enumerate("qkv"):
                add(f"{L}.self_attn.{p}_proj", "input", 0, get(f"{lid}_1", "input", 0))
                add(f"{L}.self_attn.{p}_proj", "output", 0, get(f"{lid}_2", "output", k))
            add(f"{L}.self_attn.o_proj", "input", 0, get(f"{lid}_5", "output", 0))
            add(f"{L}.self_attn.o_proj", "output", 0, get(f"{lid}_6", "output", 0))
            add(f"{L}.post_attention_layernorm", "input", 0, get(f"{lid}_9", "input", 0))
            add(f"{L}.post_attention_layernorm", "output", 0, get(f"{lid}_9", "output", 0))
            gu = get(f"{lid}_10", "output", 0)
            f = gu.shape[-1] // 2
            gate, up = gu[..., :f], gu[..., f:]
            for p, a in (("gate", gate), ("up", up)):
                add(f"{L}.mlp.{p}_proj", "input", 0, get(f"{lid}_10", "input", 0))
                add(f"{L}.mlp.{p}_proj", "output", 0, np.ascontiguousarray(a))
            g64 = gate.astype(np.float64)
            add(f"{L}.mlp.act_fn", "input", 0, np.ascontiguousarray(gate))
            add(f"{L}.mlp.act_fn", "output", 0, (g64 / (1 + np.exp(-g64))).astype(np.float32))
            add(f"{L}.mlp.down_proj", "input", 0, get(f"{lid}_12", "input", 0))
            add(f"{L}.mlp.down_proj", "output", 0, get(f"{lid}_12", "output", 0))
            add(L, "output", 0, get(lid, "output", 0))
        hidden = get(head, "input", 0)
        normed = _rmsnorm(hidden, get(head, "input", 2))
        logits = (normed.astype(np.float64) @ get(head, "input", 3).T.astype(np.float64)
                  ).astype(np.float32)
        add("model.norm", "input", 0, hidden)
        add("model.norm", "output", 0, normed)
        add("lm_head", "input", 0, normed)
        add("lm_head", "output", 0, logits)
        w.close()
    man = out / "atb_dump_data" / "manifest"
    man.mkdir(parents=True, exist_ok=True)
    (man / "_manifest.json").write_text(json.dumps({"producer": "torch"}))
    return out
