"""`atbsim` command line: help text, usage errors (exit 2, a message naming the
bad value), and `run` output format."""

from __future__ import annotations

import subprocess

import pytest

OPTIONS = ["--layers", "--hidden", "--heads", "--ffn", "--vocab", "--prompt-len", "--prompt",
           "--decode-steps", "--requests", "--dtype", "--seed", "--device", "--async",
           "--no-compute", "--inject", "--precision-fault", "--logits-out", "--port", "--devices"]


def atbsim(paths, abi: int, *args: str, **kw) -> subprocess.CompletedProcess:
    exe = paths.home(abi) / "bin" / "atbsim"
    assert exe.exists(), f"{exe} missing: run `make -j2 native`"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("argv", [["--help"], ["help"], ["run", "--help"], ["serve", "-h"]])
def test_help_lists_every_option(atbsim_paths, argv):
    res = atbsim(atbsim_paths, 1, *argv)
    assert res.returncode == 0
    for opt in OPTIONS:
        assert opt in res.stdout, opt
    for name in ("SwiGLU", "WordEmbedding", "LmHead", "stage=prefill|decode", "round"):
        assert name in res.stdout


@pytest.mark.parametrize("argv,message", [
    ([], "usage: atbsim run"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["run", "--bogus"], "unknown option '--bogus'"),
    (["run", "--dtype", "fp8"], "--dtype 'fp8': expected fp32, fp16 or bf16"),
    (["run", "--layers", "zero"], "--layers 'zero': expected an integer"),
    (["run", "--layers"], "--layers needs a value"),
    (["run", "--hidden", "64", "--heads", "5"], "head size hidden/heads"),
    (["run", "--inject", "nan:layer=0,op=Foo"], "unknown op 'Foo'"),
    (["run", "--inject", "nan:op=SwiGLU"], "add layer=N"),
    (["run", "--inject", "nan:op=LmHead,layer=1"], "drop layer="),
    (["run", "--inject", "zero:op=QKV,layer=0"], "kind must be nan, inf, -inf or scale=K"),
    (["run", "--inject", "nan:op=QKV,layer=0,when=now"], "bad field 'when=now'"),
    (["run", "--inject", "nan:op=Event,layer=0"], "no output"),
    (["run", "--layers", "2", "--inject", "nan:op=QKV,layer=2"], "layer 2 does not exist"),
    (["run", "--decode-steps", "0", "--inject", "nan:op=QKV,layer=0,stage=decode"],
     "--decode-steps is 0"),
    (["run", "--precision-fault", "fp16-everything:layer=0"],
     "kind must be one of rmsnorm-fp16-accumulate, softmax-no-max-subtract"),
    (["run", "--precision-fault", "swiglu-fp16-intermediate"], "layer=N is required"),
    (["run", "--precision-fault", "linear-fp16-accumulate:layer=0"],
     "op=NAME is required: one of QKV, OProj, GateUp, Down"),
    (["run", "--precision-fault", "rmsnorm-fp16-accumulate:layer=0,op=QKV"],
     "op 'QKV' is not a kernel rmsnorm-fp16-accumulate can be; use op=InputNorm or op=PostNorm"),
    (["run", "--precision-fault", "softmax-no-max-subtract:layer=0,round=1"],
     "bad field 'round=1'"),
    (["run", "--layers", "2", "--precision-fault", "swiglu-fp16-intermediate:layer=2"],
     "layer 2 does not exist"),
    (["run", "--dtype", "fp32", "--precision-fault", "swiglu-fp16-intermediate:layer=0"],
     "needs --dtype fp16 or bf16 (this run is fp32)"),
    (["run", "--no-compute", "--precision-fault", "swiglu-fp16-intermediate:layer=0"],
     "--no-compute does no arithmetic"),
    (["run", "--hidden", "65536", "--vocab", "1000000"], "the weights alone need"),
    (["run", "--prompt", ""], "--prompt: the text is empty"),
    (["serve", "--devices", "2"], "--port P is required"),
    (["serve", "--port", "0", "--devices", "0"], "--devices needs an integer"),
    (["serve", "--port", "0", "--device", "1"], "use --devices N"),
])
def test_usage_errors_name_the_problem(atbsim_paths, argv, message):
    res = atbsim(atbsim_paths, 0, *argv)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert res.stdout == ""


def test_run_prints_one_token_line_per_request(abi, atbsim_paths):
    res = atbsim(atbsim_paths, abi, "run", "--requests", "2", "--decode-steps", "3",
                 "--prompt", "hello")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [line.split(" tokens: ")[0] for line in lines] == ["request 0", "request 1"]
    assert all(len(line.split(" tokens: ")[1].split()) == 4 for line in lines)
    assert "dtype=fp16" in res.stderr  # the configuration is echoed on stderr


def test_prompt_text_and_length_are_different_requests(atbsim_paths):
    a = atbsim(atbsim_paths, 0, "run", "--prompt", "hello")
    b = atbsim(atbsim_paths, 0, "run", "--prompt-len", "5")
    assert a.returncode == b.returncode == 0
    assert a.stdout != b.stdout


def test_unwritable_logits_file_is_an_error(atbsim_paths, tmp_path):
    res = atbsim(atbsim_paths, 0, "run", "--logits-out", str(tmp_path / "no" / "dir" / "x"))
    assert res.returncode == 1
    assert "cannot write --logits-out" in res.stderr
