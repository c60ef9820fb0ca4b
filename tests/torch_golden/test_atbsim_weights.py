"""`atbsim run --weights DIR`: the stand-in computes the Hugging Face checkpoint's
model. Its logits (--logits-out: the prefill's last token, then one row per decode
step) against transformers' LlamaForCausalLM on the same token ids, with the decode
steps teacher-forced (--decode-ids) to the tokens torch generated."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from testkit import atbsim_bin

PROMPT = [1, 17, 42, 99, 5, 250, 3, 64]
DECODE_STEPS = 2
VOCAB = 256


def run_atbsim(*args: str | Path, abi: int = 0, cmd: str = "run") -> subprocess.CompletedProcess:
    return subprocess.run([str(atbsim_bin(abi)), cmd, *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def refused(*args: str | Path, cmd: str = "run") -> str:
    """stderr of an atbsim run that must stop with a usage error (exit 2: no crash)."""
    res = run_atbsim(*args, cmd=cmd)
    assert res.returncode == 2, (res.returncode, res.stderr)
    return res.stderr


def ids_arg(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def torch_logits(checkpoint: Path, ids: list[int]) -> np.ndarray:
    """fp32 logits of every position of `ids`, [len(ids), vocab]."""
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


@pytest.fixture(scope="module")
def golden(tiny_llama_checkpoint) -> tuple[list[int], np.ndarray]:
    """torch's greedy tokens after PROMPT (prefill + DECODE_STEPS decode steps) and
    the logits rows that chose them, [1 + DECODE_STEPS, vocab]."""
    seq = list(PROMPT)
    for _ in range(1 + DECODE_STEPS):
        seq.append(int(torch_logits(tiny_llama_checkpoint, seq)[-1].argmax()))
    logits = torch_logits(tiny_llama_checkpoint, seq[:-1])[len(PROMPT) - 1:]
    return seq[len(PROMPT):], logits


def atbsim_logits(tmp_path: Path, checkpoint: Path, *args: str, abi: int = 0,
                  prompt: list[int] = PROMPT) -> tuple[list[int], np.ndarray]:
    out = tmp_path / f"logits{len(list(tmp_path.iterdir()))}.bin"
    res = run_atbsim("--weights", checkpoint, "--prompt-ids", ids_arg(prompt), "--logits-out", out,
                     *args, abi=abi)
    assert res.returncode == 0, res.stderr
    tokens = [int(t) for t in res.stdout.split(":", 1)[1].split()]
    return tokens, np.fromfile(out, dtype=np.float32).reshape(-1, VOCAB)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """Largest absolute difference over the largest reference magnitude."""
    assert got.shape == want.shape
    return float(np.abs(got - want).max() / np.abs(want).max())


def test_fp32_matches_torch(abi, tmp_path, tiny_llama_checkpoint, golden):
    tokens, want = golden
    got_tokens, got = atbsim_logits(tmp_path, tiny_llama_checkpoint, "--decode-ids",
                                    ids_arg(tokens[:DECODE_STEPS]), abi=abi)
    assert relative_error(got, want) < 1e-5
    assert got_tokens == tokens  # fp32: the same greedy choices, not only the forced ones


@pytest.mark.parametrize("dtype, eps", [("fp16", 2.0**-10), ("bf16", 2.0**-7)])
def test_half_precision_within_its_tolerance(tmp_path, tiny_llama_checkpoint, golden, dtype, eps):
    tokens, want = golden
    _, got = atbsim_logits(tmp_path, tiny_llama_checkpoint, "--dtype", dtype, "--decode-ids",
                           ids_arg(tokens[:DECODE_STEPS]))
    # Weights and activations rounded to the format at every op: a few units of its epsilon
    # (measured: fp16 1.0e-3, bf16 1.1e-2); a wrong weight mapping is off by O(1).
    assert relative_error(got, want) < 4 * eps


def test_decode_ids_force_the_fed_tokens(tmp_path, tiny_llama_checkpoint, golden):
    """Tokens the model would not pick: the logits are torch's for that sequence."""
    forced = [(t + 101) % VOCAB for t in golden[0][:DECODE_STEPS]]
    _, got = atbsim_logits(tmp_path, tiny_llama_checkpoint, "--decode-ids", ids_arg(forced))
    want = torch_logits(tiny_llama_checkpoint, PROMPT + forced)[len(PROMPT) - 1:]
    assert relative_error(got, want) < 1e-5


def test_decode_steps_default_to_the_decode_ids(tmp_path, tiny_llama_checkpoint):
    tokens, logits = atbsim_logits(tmp_path, tiny_llama_checkpoint, "--decode-ids", "7,8,9")
    assert len(tokens) == 4 and logits.shape == (4, VOCAB)
    err = refused("--weights", tiny_llama_checkpoint, "--decode-ids", "7,8,9",
                  "--decode-steps", "2")
    assert "--decode-ids has 3 ids for --decode-steps 2" in err


def copy_checkpoint(src: Path, dst: Path, **config) -> Path:
    shutil.copytree(src, dst)
    path = dst / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return dst


def test_sharded_half_checkpoint_defaults_to_its_dtype(tmp_path, tiny_llama_checkpoint):
    """model.safetensors.index.json with its shards, stored in fp16: the config's dtype is
    the default --dtype, and the values are the fp32 checkpoint's rounded the same way."""
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint, dtype=torch.float16)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, safe_serialization=True, max_shard_size="50KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    assert not (sharded / "model.safetensors").exists()
    res = run_atbsim("--weights", sharded, "--decode-steps", "1")
    assert res.returncode == 0 and "dtype=fp16" in res.stderr, res.stderr
    _, from_shards = atbsim_logits(tmp_path, sharded)
    _, converted = atbsim_logits(tmp_path, tiny_llama_checkpoint, "--dtype", "fp16")
    assert np.array_equal(from_shards, converted)


def test_tied_embeddings_use_the_embedding_as_lm_head(tmp_path, tiny_llama_checkpoint):
    from safetensors.numpy import load_file, save_file

    tied = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "tied", tie_word_embeddings=True)
    tensors = load_file(tied / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, tied / "model.safetensors", metadata={"format": "pt"})
    _, got = atbsim_logits(tmp_path, tied, "--decode-ids", "7,8")
    want = torch_logits(tied, PROMPT + [7, 8])[len(PROMPT) - 1:]
    assert relative_error(got, want) < 1e-5


def test_sizes_given_with_weights_must_agree(tiny_llama_checkpoint):
    ok = run_atbsim("--weights", tiny_llama_checkpoint, "--layers", "2", "--hidden", "64",
                    "--decode-steps", "0")
    assert ok.returncode == 0, ok.stderr
    assert "--layers 3 disagrees with the checkpoint's num_hidden_layers 2" in refused(
        "--weights", tiny_llama_checkpoint, "--layers", "3")
    assert "--seed is for random weights" in refused(
        "--weights", tiny_llama_checkpoint, "--seed", "4")


def test_prompt_ids_are_checked(tiny_llama_checkpoint):
    assert "token 256 is outside the vocabulary [0, 256)" in refused(
        "--weights", tiny_llama_checkpoint, "--prompt-ids", "1,256")
    assert "expected token ids separated by commas" in refused(
        "--weights", tiny_llama_checkpoint, "--prompt-ids", "1,,2")
    assert "drop --prompt" in refused("--prompt-ids", "1,2", "--prompt", "hi")


def raw_safetensors(path: Path, header: dict, data: bytes) -> None:
    """A safetensors file as written, header and all, to craft what no writer would."""
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


CONFIG_ERRORS = [
    ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"},
     "architectures [GPT2LMHeadModel]: atbsim computes LlamaForCausalLM only"),
    ({"num_key_value_heads": 2}, "num_key_value_heads 2 != num_attention_heads 4"),
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 500.0}},
     "rope type 'llama3': atbsim computes the default rotary embedding only"),
    ({"hidden_act": "gelu"}, "\"hidden_act\" 'gelu'"),
    ({"intermediate_size": 96},
     "tensor 'model.layers.0.mlp.gate_proj.weight' in {dir}/model.safetensors has shape "
     "[128, 64], config.json makes it [96, 64]"),
    ({"hidden_size": "64"}, "\"hidden_size\" must be a whole number"),
    ({"dtype": "float64"}, "dtype 'float64' is not float32, float16 or bfloat16"),
]


@pytest.mark.parametrize("config, message", CONFIG_ERRORS, ids=lambda v: str(v)[:30])
def test_unsupported_config_is_a_usage_error(tmp_path, tiny_llama_checkpoint, config, message):
    bad = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "bad", **config)
    assert message.format(dir=bad) in refused("--weights", bad)


def test_bad_files_are_usage_errors(tmp_path, tiny_llama_checkpoint):
    from safetensors.numpy import load_file, save_file

    absent = tmp_path / "absent"
    assert f"{absent}/config.json: cannot read it" in refused("--weights", absent)

    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "d")
    (d / "config.json").write_text("{not json")
    assert "config.json: not valid JSON" in refused("--weights", d)

    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "nofile")
    (d / "model.safetensors").unlink()
    assert "neither model.safetensors nor model.safetensors.index" in refused("--weights", d)

    tensors = load_file(tiny_llama_checkpoint / "model.safetensors")
    weights = d / "model.safetensors"
    del tensors["model.layers.1.self_attn.v_proj.weight"]
    save_file(tensors, weights)
    assert "has no tensor 'model.layers.1.self_attn.v_proj.weight'" in refused("--weights", d)

    tensors["model.layers.1.self_attn.v_proj.weight"] = np.zeros((64, 64), np.int8)
    save_file(tensors, weights)
    assert (f"tensor 'model.layers.1.self_attn.v_proj.weight' in {weights} has dtype I8; atbsim "
            "reads F32, F16 and BF16 weights") in refused("--weights", d)


@pytest.mark.parametrize("header, data, message", [
    (None, b"", "3 bytes, too short for a safetensors file"),
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4,
     "tensor 'x': data_offsets lie outside the file's 4 data bytes"),
    ({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8,
     "tensor 'x': 8 bytes for a F32 tensor of 3 elements"),
    ({"x": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 8]}}, b"\0" * 8,
     "tensor 'x': 8 bytes for a F32 tensor of more elements"),
    ({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, b"",
     "tensor 'x': the shape holds a value that is not a whole number"),
    ({"x": {"shape": [1]}}, b"",
     "tensor 'x': the header entry needs dtype, shape and data_offsets"),
    ([], b"", "the header is not a JSON object"),
], ids=["short", "offsets", "bytes", "overflow", "negative", "fields", "array"])
def test_crafted_safetensors_are_usage_errors(tmp_path, tiny_llama_checkpoint, header, data,
                                              message):
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "crafted")
    weights = d / "model.safetensors"
    if header is None:
        weights.write_bytes(b"\x10\0\0")
    else:
        raw_safetensors(weights, header, data)
    assert f"{weights}: {message}" in refused("--weights", d)


def _replace(path: Path, kind: str) -> None:
    """`path` becomes a FIFO, or a link to a device that never ends."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(kind)


@pytest.mark.parametrize("kind,what", [("fifo", "a FIFO"), ("/dev/zero", "a character device")])
@pytest.mark.parametrize("name", ["config.json", "model.safetensors",
                                  "model.safetensors.index.json"])
def test_files_that_are_not_regular_are_refused_by_name(tmp_path, tiny_llama_checkpoint, kind,
                                                         what, name):
    """A FIFO once hung --weights; /dev/zero was read for gigabytes."""
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "d")
    if name.endswith("index.json"):  # a sharded checkpoint: the index is read first
        (d / "model.safetensors").rename(d / "shard.safetensors")
        (d / name).write_text("{}")
    _replace(d / name, kind)
    assert f"{d / name}: " in (err := refused("--weights", d))
    assert f"is {what}, not a regular file" in err


def test_headers_and_configs_larger_than_a_checkpoint_needs_are_refused(tmp_path,
                                                                       tiny_llama_checkpoint):
    """A 90 MB JSON array in a header (under the format's 100 MB) once ended in
    std::bad_alloc at 3 GB."""
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "d")
    weights = d / "model.safetensors"
    text = b"[" + b"0," * (45 << 20) + b"0]"
    weights.write_bytes(len(text).to_bytes(8, "little") + text)
    assert "more than the 8388608 a checkpoint's header needs" in refused("--weights", d)
    text = b"[" + b"0," * (3 << 20) + b"0]"  # under the size bound: 3M values
    weights.write_bytes(len(text).to_bytes(8, "little") + text)
    assert "the header is not valid JSON (more than 1000000 values" in refused("--weights", d)
    (d / "config.json").write_text(json.dumps({"pad": "x" * (2 << 20)}))
    assert "config.json: cannot read it: larger than the 1048576 bytes" in refused("--weights", d)


def test_truncated_file_is_a_usage_error(tmp_path, tiny_llama_checkpoint):
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "cut")
    weights = d / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # the header intact, the last tensor cut
    err = refused("--weights", d)
    assert f"{weights}: tensor '" in err and "lie outside the file's" in err


def test_shard_names_stay_in_the_directory(tmp_path, tiny_llama_checkpoint):
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "idx")
    (d / "model.safetensors").rename(d / "part-1.safetensors")
    index = {"weight_map": {"model.norm.weight": "../part-1.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "maps to '../part-1.safetensors', not a file name in" in refused("--weights", d)
    index["weight_map"] = {"model.norm.weight": "part-2.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "part-2.safetensors: No such file or directory" in refused("--weights", d)


def test_serve_answers_from_the_checkpoint(tmp_path, tiny_llama_checkpoint):
    """`serve --weights`: each worker loads the checkpoint; a chat request's tokens are
    `run --prompt`'s (one byte, one token)."""
    import urllib.request

    assert "config.json: cannot read it" in refused("--port", "0", "--weights", tmp_path,
                                                    cmd="serve")
    run = run_atbsim("--weights", tiny_llama_checkpoint, "--prompt", "hi", "--decode-steps", "2")
    assert run.returncode == 0, run.stderr
    with (tmp_path / "serve.err").open("w") as err:
        serve = subprocess.Popen([str(atbsim_bin(0)), "serve", "--port", "0", "--weights",
                                  str(tiny_llama_checkpoint)], stdout=subprocess.PIPE,
                                 stderr=err, text=True)
    try:
        lines = [serve.stdout.readline()]
        while lines[-1] not in ("", "Daemon start success!\n"):  # "": it exited
            lines.append(serve.stdout.readline())
        assert lines[-1], (lines, (tmp_path / "serve.err").read_text())
        port = int(lines[0].rsplit(":", 1)[1])  # "Listening on 127.0.0.1:<port>"
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/chat/completions",
                                    body.encode(), timeout=30) as resp:
            tokens = json.loads(resp.read())["tokens"]
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    assert run.stdout == f"request 0 tokens: {' '.join(map(str, tokens))}\n"


def mutated_headers(original: bytes, count: int, seed: int = 21):
    """`count` variants of a safetensors file: header fields set to hostile values, header
    bytes flipped, the length prefix changed, the file cut short."""
    import random

    rng = random.Random(seed)
    n = int.from_bytes(original[:8], "little")
    header, body = json.loads(original[8:8 + n]), original[8 + n:]
    hostile = [-1, 0, 1, 2**31, 2**53, 2**64, 1.5, "8", None, [], {}, [0], [8, 0], [0, 2**62]]
    for i in range(count):
        kind = i % 4
        if kind == 0:
            h = json.loads(json.dumps(header))
            entry = h[rng.choice([k for k in h if k != "__metadata__"])]
            field = rng.choice(["dtype", "shape", "data_offsets"])
            entry[field] = rng.choice(hostile + ["F64", "I8", "BOOL", "X"])
            text = json.dumps(h).encode()
            yield len(text).to_bytes(8, "little") + text + body
        elif kind == 1:
            raw = bytearray(original)
            for _ in range(rng.randint(1, 4)):
                raw[rng.randrange(8, 8 + n)] = rng.randrange(256)
            yield bytes(raw)
        elif kind == 2:
            length = rng.choice([0, n - 1, n + 1, 2**63, 2**64 - 1])
            yield length.to_bytes(8, "little") + original[8:]
        else:
            yield original[:rng.randrange(len(original))]


def test_hostile_safetensors_never_crash(tmp_path, tiny_llama_checkpoint):
    """Every variant either loads (exit 0) or is refused with one message (exit 2): no
    signal, no runtime failure, no read past the file."""
    d = copy_checkpoint(tiny_llama_checkpoint, tmp_path / "hostile")
    weights = d / "model.safetensors"
    original = weights.read_bytes()
    outcomes = []
    for variant in mutated_headers(original, 96):
        weights.write_bytes(variant)
        res = run_atbsim("--weights", d, "--decode-steps", "1")
        assert res.returncode in (0, 2), (res.returncode, res.stderr[-2000:])
        outcomes.append(res.returncode)
        if res.returncode == 2:
            assert res.stderr.startswith("atbsim: --weights: "), res.stderr
    assert outcomes.count(2) > len(outcomes) // 2  # most variants are refused, as they should be
