"""Torch dumper: a small Llama's generate with and without Dumper (docs/contracts.md §8).

A random LlamaForCausalLM (4 layers, hidden 256, fp32, CPU) generates 8 tokens from a
32-token prompt: 8 forward calls, every module dumped (save_child, exec_range all).
Variants run interleaved, REPEAT times each; the figures are medians. "generate" is
the time inside the `with`, "with the build" adds its end, where the record log is
built into statistic.csv, info/, markers and manifest."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

REPEAT = 5
NEW_TOKENS = 8
PROMPT_LEN = 32
SMALL_LLAMA = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=8, vocab_size=1024,
                   max_position_embeddings=256)
VARIANTS = {"statistics": {"task": "statistics"}, "tensor": {"task": "tensor"}}


def _model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL_LLAMA)).eval()


def _generate(model, prompt) -> None:
    model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                   do_sample=False)


def _dumped(model, prompt, tmp: Path, task: dict) -> tuple[float, float, int, int]:
    """(generate s, with the build s, tensors, bytes written) of one dumped run."""
    from msprobe_atb.torch import Dumper

    out = Path(tempfile.mkdtemp(dir=tmp))
    dumper = Dumper(model, out, {"dump_enable": True, "exec_range": "all", "save_child": True,
                                 **task})
    start = time.perf_counter()
    with dumper:
        _generate(model, prompt)
        gen = time.perf_counter() - start
    total = time.perf_counter() - start
    c = dumper.counts
    shutil.rmtree(out)
    return gen, total, c.tensors_written, c.bytes_written


def run():
    import torch

    torch.set_num_threads(1)  # a 2-core machine shared with the other benchmarks
    model = _model()
    prompt = torch.arange(PROMPT_LEN).reshape(1, -1)
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_torch."))
    plain: list[float] = []
    runs: dict[str, list[tuple[float, float, int, int]]] = {v: [] for v in VARIANTS}
    try:
        with torch.no_grad():
            _generate(model, prompt)  # warm-up
            for _ in range(REPEAT):
                start = time.perf_counter()
                _generate(model, prompt)
                plain.append(time.perf_counter() - start)
                for name, task in VARIANTS.items():
                    runs[name].append(_dumped(model, prompt, tmp, task))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(plain)
    yield (f"no dumper        generate {base:7.3f} s  ({NEW_TOKENS} forward calls, "
           f"{sum(1 for _ in model.modules())} modules, median of {REPEAT} interleaved runs)")
    for name, rs in runs.items():
        gen = statistics.median(r[0] for r in rs)
        total = statistics.median(r[1] for r in rs)
        n = rs[0][2]
        yield (f"task {name:<11} generate {gen:7.3f} s  ({gen / base:5.1f}x, "
               f"+{(gen - base) / max(n, 1) * 1e3:.2f} ms per tensor), with the build "
               f"{total:7.3f} s ({total / base:5.1f}x); {n} tensors, "
               f"{rs[0][3] / 2**20:.1f} MiB written per run")
