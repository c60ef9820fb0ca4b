"""A Python host (as MindIE runs ATB from Python): a Python process loads
lib/libatbsim_model.so through ctypes and runs the model, with and without a
preloaded recording probe. Each case runs in its own Python process, so a
probe can be preloaded and the two ABIs never share a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HOST = r'''
import ctypes, json, sys

lib = ctypes.CDLL(sys.argv[1])
i64p = ctypes.POINTER(ctypes.c_int64)
lib.atbsim_model_create.restype = ctypes.c_void_p
lib.atbsim_model_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
lib.atbsim_model_generate.restype = ctypes.c_long
lib.atbsim_model_generate.argtypes = [ctypes.c_void_p, i64p, ctypes.c_size_t, ctypes.c_int, i64p,
                                      ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
lib.atbsim_model_destroy.argtypes = [ctypes.c_void_p]

def generate(model, prompt, n):
    err = ctypes.create_string_buffer(512)
    out = (ctypes.c_int64 * 64)()
    ids = (ctypes.c_int64 * len(prompt))(*prompt) if prompt else None
    got = lib.atbsim_model_generate(model, ids, len(prompt), n, out, 64, err, 512)
    return list(out[:got]) if got >= 0 else err.value.decode()

err = ctypes.create_string_buffer(512)
model = lib.atbsim_model_create(sys.argv[2].encode(), err, 512)
result = {"error": err.value.decode()} if not model else {
    "default": generate(model, [], 0),
    "hello": generate(model, list(b"hello"), 5),
    "again": generate(model, list(b"hello"), 5),
    "bad_token": generate(model, [100000], 2),
}
if model:
    lib.atbsim_model_destroy(model)
print(json.dumps(result))
'''


@pytest.fixture
def pyhost(atbsim_paths, run_host, tmp_path):
    script = tmp_path / "host.py"
    script.write_text(HOST)

    def run(abi: int, options: str, probe: bool = False):
        lib = atbsim_paths.lib(abi, "libatbsim_model.so")
        res = run_host([Path(sys.executable), script, lib, options],
                       preload=atbsim_paths.recording_probe(abi) if probe else None)
        assert res.returncode == 0, res.stderr
        return res, json.loads(res.stdout)

    return run


def cli_tokens(paths, abi: int, *args: str) -> list[int]:
    res = subprocess.run([str(paths.home(abi) / "bin" / "atbsim"), "run", *args],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [int(t) for t in res.stdout.split("tokens: ")[1].split()]


def test_python_host_matches_the_cli(abi, atbsim_paths, pyhost):
    _, out = pyhost(abi, "--layers 3 --decode-steps 2 --dtype bf16")
    assert out["default"] == cli_tokens(atbsim_paths, abi, "--layers", "3", "--decode-steps", "2",
                                        "--dtype", "bf16")
    assert out["hello"] == out["again"] == cli_tokens(
        atbsim_paths, abi, "--layers", "3", "--decode-steps", "4", "--dtype", "bf16", "--prompt",
        "hello")
    assert "outside the vocabulary" in out["bad_token"]


def test_python_host_under_a_recording_probe(abi, pyhost):
    res, out = pyhost(abi, "--async", probe=True)
    assert len(out["default"]) == 5
    models = [c["args"]["model"] for c in res.of("ReportModelTopoInfo")]
    # The bad-token request is refused before any op runs; the others ran both models.
    assert set(models) == {"DecoderModel_Prefill", "DecoderModel_Decoder"}
    assert {t["path"].split("/")[0] for t in res.trace} == {f"0_{res.pid}"}
    assert {c["tid"] for c in res.of("ReportKernelIOTensor")} - {res.pid}  # async thread


def test_python_host_async_matches_sync(pyhost):
    _, sync = pyhost(0, "--decode-steps 3")
    _, asyn = pyhost(0, "--decode-steps 3 --async")
    assert sync == asyn


@pytest.mark.parametrize("options,message", [
    ("--dtype fp8", "--dtype 'fp8'"),
    ("--frob", "unknown model option '--frob'"),
    ("--hidden 60 --heads 4", "head size"),
])
def test_python_host_gets_clear_create_errors(pyhost, options, message):
    _, out = pyhost(1, options)
    assert message in out["error"]
