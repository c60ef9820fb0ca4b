"""The stand-in ATB libraries: exported hook symbols, link flags, set_env.sh,
the ACL stand-in, interposition per ABI, and how tensors reach SaveTensor."""

from __future__ import annotations

import ctypes
import struct
import subprocess
import threading

import pytest
from testkit import (
    HOOKS_NEUTRAL,
    atb_helpers,
    dynamic_symbols,
    fnv1a64,
    hooks_by_abi,
    speed_hooks,
)

NEUTRAL = sorted(HOOKS_NEUTRAL)
BY_ABI = {abi: sorted(hooks_by_abi(abi) | atb_helpers(abi)) for abi in (0, 1)}
SPEED = {abi: sorted(speed_hooks(abi)) for abi in (0, 1)}
STRING_HOOKS = {"IsTensorNeedSave", "SaveTensor", "SaveTiling", "SaveParam",
                "ReportOperationIOTensor", "ReportOperationSetupStatistic",
                "ReportKernelIOTensor", "ReportOverflowKernel", "IsSaveTensorInSpecificDir",
                "ReportOperationGraph", "IsReportModelTopoInfo", "ReportModelTopoInfo"}


def test_hooks_exported_with_real_mangled_names(abi, atbsim_paths):
    atb = dynamic_symbols(atbsim_paths.lib(abi, "libatb.so"))
    for name in NEUTRAL + BY_ABI[abi]:
        assert atb.get(name) == "T", f"{name} not a defined global text symbol of libatb.so"
    for name in BY_ABI[1 - abi]:
        assert name not in atb, f"libatb.so (abi{abi}) exports the other ABI's {name}"
    speed = dynamic_symbols(atbsim_paths.lib(abi, "libatb_speed.so"))
    for name in SPEED[abi]:
        assert speed.get(name) == "T", name
    acl = dynamic_symbols(atbsim_paths.lib(abi, "libascendcl.so"))
    for name in ("aclrtGetDevice", "aclrtSetDevice", "aclrtMemcpy", "aclrtSynchronizeStream"):
        assert acl.get(name) == "T", name


def test_link_flags_match_atb(abi, atbsim_paths):
    dyn = subprocess.run(["readelf", "-d", str(atbsim_paths.lib(abi, "libatb.so"))],
                         check=True, capture_output=True, text=True).stdout
    assert "[$ORIGIN]" in dyn  # finds libascendcl.so next to it
    assert "BIND_NOW" in dyn or "NOW" in dyn
    assert "SYMBOLIC" not in dyn  # -Bsymbolic would silently defeat LD_PRELOAD
    assert "libascendcl.so" in dyn


def test_set_env_sh(abi, atbsim_paths):
    home = atbsim_paths.home(abi)
    out = subprocess.run(
        ["bash", "-c", f'LD_LIBRARY_PATH=/x; source "{home}/set_env.sh"; '
                       'echo "$ATB_HOME_PATH"; echo "$LD_LIBRARY_PATH"'],
        check=True, capture_output=True, text=True).stdout.split("\n")
    assert out[0] == str(home) and out[0].endswith(f"cxx_abi_{abi}")
    assert out[1] == f"{home}/lib:/x"


def test_acl_current_device_is_per_thread(atbsim_paths):
    acl = ctypes.CDLL(str(atbsim_paths.lib(0, "libascendcl.so")))
    dev = ctypes.c_int32(-7)
    results = {}

    def other_thread():
        d = ctypes.c_int32(-7)
        results["rc"] = acl.aclrtGetDevice(ctypes.byref(d))

    t = threading.Thread(target=other_thread)
    assert acl.aclrtSetDevice(3) == 0
    assert acl.aclrtGetDevice(ctypes.byref(dev)) == 0 and dev.value == 3
    t.start()
    t.join()
    assert results["rc"] != 0  # no device set on that thread
    assert acl.aclrtGetDevice(None) != 0
    src = ctypes.create_string_buffer(b"abcd")
    dst = ctypes.create_string_buffer(4)
    assert acl.aclrtMemcpy(dst, 4, src, 4, 2) == 0 and dst.raw == b"abcd"
    assert acl.aclrtMemcpy(dst, 2, src, 4, 2) != 0  # destination too small


def test_runs_with_atb_defaults_and_saves_nothing(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "2"])
    assert run.returncode == 0 and run.stdout.strip() == "status=0", run.stderr
    assert run.calls == [] and run.trace == []


def test_mismatched_abi_preload_overrides_only_argument_free_hooks(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(1 - abi))
    assert run.returncode == 0, run.stderr
    seen = set(run.fns())
    assert {"IsSaveTensorDesc", "UpdateConfig", "IsOverflowCheck",
            "ReportOperationGraphEnable", "IsExecuteCountInRange"} <= seen
    assert not seen & STRING_HOOKS  # silently still ATB's defaults
    assert run.trace == []  # IsTensorNeedSave stayed false: nothing selected


def test_save_tensor_payloads(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi))
    saves = run.of("SaveTensor")
    assert len(saves) == len(run.trace) > 0
    for call, line in zip(saves, run.trace):  # the trace is written just before each call
        a = call["args"]
        assert (a["path"], a["format"], a["dtype"], a["dims"], a["size"], a["fnv1a64"]) == (
            line["path"], line["format"], line["dtype"], line["dims"], line["size"],
            line["fnv1a64"])
    x = next(c["args"] for c in saves if c["args"]["path"].endswith("0_Layer/before/intensor0.bin"))
    assert x["fnv1a64"] == fnv1a64(struct.pack("<8f", *(1.0 + 0.25 * i for i in range(8))))
    # the output is saved "before" (pre-execution contents: zeros) and "after" (results)
    before = next(c["args"] for c in saves
                  if c["args"]["path"].endswith("0_Layer/before/outtensor0.bin"))
    after = next(c["args"] for c in saves
                 if c["args"]["path"].endswith("0_Layer/after/outtensor0.bin"))
    assert before["fnv1a64"] == fnv1a64(bytes(32)) != after["fnv1a64"]


def test_save_data_false_only_skips_the_sync(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi),
                   answers="all-true,IsSaveTensorData=0")
    assert len(run.of("SaveTensor")) == len(run.trace) > 0  # quirk 4


def test_host_buffer_is_poisoned_after_save_tensor(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi), env={"RECPROBE_CHECK_FREE": "1"})
    assert run.returncode == 0, run.stderr
    freed = run.of("_freed")
    assert len(freed) == len(run.of("SaveTensor"))  # every buffer freed right after the call
    assert all(f["args"]["poisoned"] == f["args"]["size"] > 0 for f in freed), freed[:3]


def test_save_tensor_exception_is_caught(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi), env={"RECPROBE_THROW": "1"})
    assert run.returncode == 0, run.stderr
    assert "Probe::SaveTensor threw" in run.stderr and "RECPROBE_THROW" in run.stderr
    assert len(run.of("SaveTensor")) == len(run.trace)  # later saves still happen


def test_overflow_is_reported_per_kernel(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1", "--overflow"],
                   preload=atbsim_paths.recording_probe(abi), answers="all-true,IsOverflowStop=0")
    assert run.returncode == 0, run.stderr
    kernels = [c["args"]["kernel"] for c in run.of("ReportOverflowKernel")]
    # ATB scans the op's outputs after each kernel: MatMulKernel writes the
    # runner's scratch tensor, which no scan reads, so MulsKernel is the first
    assert kernels == ["LinearOperation_0_0:MulsKernel", "ElewiseOperation_0_1_0:AddKernel",
                       "ActivationOperation_0_1_1:SwishKernel"]
    clean = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                     preload=atbsim_paths.recording_probe(abi))
    assert clean.of("ReportOverflowKernel") == []


def test_overflow_stop_fails_the_runner(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "2", "--overflow"],
                   preload=atbsim_paths.recording_probe(abi))
    assert run.returncode == 1 and "status=3" in run.stdout
    assert [c["args"]["kernel"] for c in run.of("ReportOverflowKernel")] == [
        "LinearOperation_0_0:MulsKernel"]
    paths = [c["args"]["path"] for c in run.of("SaveTensor")]
    assert not any("MulsKernel/after" in p or "1_Residual" in p for p in paths)
    assert any("MulsKernel/before" in p for p in paths)
    # the failed runners still save "after" (ATB saves after ExecuteImpl either way)
    assert any(p.endswith("0_LinearOperation/after/outtensor0_output.bin") for p in paths)
    assert any(p.endswith("0_Layer/after/outtensor0.bin") for p in paths)


@pytest.mark.parametrize("stream", [False, True])
def test_context_asks_overflow_check(abi, atbsim_paths, run_host, stream):
    args = [atbsim_paths.protocol_host(abi), "--rounds", "1"] + (["--stream"] if stream else [])
    run = run_host(args, preload=atbsim_paths.recording_probe(abi), answers="defaults")
    fns = run.fns()
    lead = 2 if stream else 1  # Context() and SetExecuteStream()
    assert fns[:lead] == ["IsOverflowCheck"] * lead and fns[lead] != "IsOverflowCheck"
    assert fns[-1] == "IsOverflowCheck"  # ~Context()


def test_device_id_minus_one_without_device(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1", "--no-device"],
                   preload=atbsim_paths.recording_probe(abi))
    assert run.returncode == 0, run.stderr
    paths = [c["args"]["path"] for c in run.of("SaveTensor")]
    assert paths and all(p.startswith(f"-1_{run.pid}/0/0_Layer/") for p in paths)


def test_api_misuse_is_refused_with_a_message(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--bad-input"])
    assert run.returncode == 0, run.stderr
    cases = dict(line.split("=") for line in run.stdout.split())
    assert len(cases) == 10 and set(cases.values()) == {"ok"}, cases
    for msg in ("inferShape is required", "tensor id 7 out of range",
                "already a graph node or a top-level op", "call Setup on the graph",
                "Execute without a successful Setup", "expected 1 / 1"):
        assert msg in run.stderr, msg


@pytest.mark.parametrize("overflow", [False, True])
def test_top_level_leaf_op_and_half_precision_scan(abi, atbsim_paths, run_host, overflow):
    """A leaf op called directly (no graph), with fp16 and bf16 outputs: the
    overflow scan reads the op's outputs after each kernel, so the fp16 Inf
    CastF16Kernel wrote is found again after CastBf16Kernel (whose own bf16
    Inf, 0x7F80, ATB's scan reads as an fp16 NaN)."""
    args = [atbsim_paths.protocol_host(abi), "--leaf", "--rounds", "1"]
    run = run_host(args + (["--overflow"] if overflow else []),
                   preload=atbsim_paths.recording_probe(abi), answers="all-true,IsOverflowStop=0")
    assert run.returncode == 0, run.stderr
    kernels = [c["args"]["kernel"] for c in run.of("ReportOverflowKernel")]
    assert kernels == (["CastOperation_0:CastF16Kernel", "CastOperation_0:CastBf16Kernel"]
                       if overflow else [])
    graph = run.of("ReportOperationGraph")[0]["args"]
    assert graph == {"opName": "CastOperation_0",
                     "graph": '{"inTensorNum":1,"opName":"CastOperation_0",'
                              '"opType":"CastOperation","outTensorNum":2,'
                              '"param":{"outTensorType":1}}'}
    root = f"0_{run.pid}/0/0_CastOperation"
    saves = {c["args"]["path"]: c["args"] for c in run.of("SaveTensor")}
    assert saves[f"{root}/after/outtensor1.bin"]["dtype"] == "27"
    assert saves[f"{root}/0_CastF16Kernel/after/outtensor0.bin"]["dtype"] == "1"
    assert [c["args"]["path"] for c in run.of("SaveParam")] == [f"{root}/op_param.json"]
