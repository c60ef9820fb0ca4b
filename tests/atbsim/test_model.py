"""The stand-in Llama model (`atbsim run`) as a probe sees it: numerics,
graph structure, names, IR file names, params, and fault injection checked
through the recording probe (RECPROBE_LOG) and the runtime's SaveTensor trace."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

TOKENS = re.compile(r"^request (\d+) tokens: ([\d ]+)$", re.M)
INJECTED = re.compile(r"^\[atbsim\] injected .* -> (\S+)$", re.M)
# Predicates all true except stopping on overflow, so a poisoned run completes.
ANSWERS = "all-true,IsOverflowStop=0"
LAYER_TYPES = [
    "RmsNormOperation", "LinearOperation", "SplitOperation", "RopeOperation",
    "ReshapeAndCacheOperation", None, "LinearOperation", "ElewiseOperation", "EventOperation",
    "RmsNormOperation", "LinearOperation", "ActivationOperation", "LinearOperation",
    "ElewiseOperation",
]
ATTENTION = {"Prefill_layer": "SelfAttentionOperation", "Decoder_layer": "PagedAttentionOperation"}


def atbsim(paths, abi: int) -> Path:
    return paths.home(abi) / "bin" / "atbsim"


def tokens_of(stdout: str) -> list[list[int]]:
    return [[int(t) for t in m.group(2).split()] for m in TOKENS.finditer(stdout)]


def rel(path: str) -> str:
    """A dump path without its `{dev}_{pid}` component, comparable across runs."""
    return path.split("/", 1)[1]


def run_model(run_host, paths, abi, *args, answers=ANSWERS, probe=True):
    res = run_host(
        [atbsim(paths, abi), "run", *args],
        preload=paths.recording_probe(abi) if probe else None,
        answers=answers,
    )
    assert res.returncode == 0, res.stderr
    return res


def graphs(res) -> dict[str, dict]:
    calls = res.of("ReportOperationGraph")
    return {c["args"]["opName"]: json.loads(c["args"]["graph"]) for c in calls}


def test_tokens_are_deterministic(abi, atbsim_paths, run_host):
    a = run_model(run_host, atbsim_paths, abi, "--decode-steps", "6", probe=False)
    b = run_model(run_host, atbsim_paths, abi, "--decode-steps", "6", probe=False)
    other = run_model(run_host, atbsim_paths, abi, "--decode-steps", "6", "--seed", "7",
                      probe=False)
    assert tokens_of(a.stdout) == tokens_of(b.stdout)
    assert len(tokens_of(a.stdout)[0]) == 7
    assert tokens_of(other.stdout) != tokens_of(a.stdout)


def test_dtypes_give_close_logits(atbsim_paths, run_host, tmp_path):
    logits, toks = {}, {}
    for dtype in ("fp32", "fp16", "bf16"):
        out = tmp_path / f"{dtype}.f32"
        res = run_model(run_host, atbsim_paths, 1, "--dtype", dtype, "--decode-steps", "8",
                        "--logits-out", out, probe=False)
        logits[dtype] = np.fromfile(out, dtype="<f4").reshape(9, 256)
        toks[dtype] = tokens_of(res.stdout)
    ref = logits["fp32"]
    assert np.isfinite(ref).all() and np.abs(ref).max() > 0.5
    assert np.abs(logits["fp16"] - ref).max() < 0.02
    assert np.abs(logits["bf16"] - ref).max() < 0.1
    assert toks["fp16"] == toks["fp32"] == toks["bf16"]
    # The same prompt with other weights is far away: the bounds above mean something.
    other = tmp_path / "seed.f32"
    run_model(run_host, atbsim_paths, 1, "--dtype", "fp32", "--seed", "2", "--decode-steps", "8",
              "--logits-out", other, probe=False)
    assert np.abs(np.fromfile(other, dtype="<f4").reshape(9, 256) - ref).max() > 0.5


def test_layer_graphs_and_names(abi, atbsim_paths, run_host):
    res = run_model(run_host, atbsim_paths, abi, "--layers", "3", "--decode-steps", "1")
    g = graphs(res)
    # Top-level op ids follow creation order: prefill model first, then decode.
    assert list(g) == ["WordEmbedding_0", "Prefill_layer_1", "Prefill_layer_2", "Prefill_layer_3",
                       "LmHead_4", "WordEmbedding_5", "Decoder_layer_6", "Decoder_layer_7",
                       "Decoder_layer_8", "LmHead_9"]
    for name, graph in g.items():
        kind = name.rsplit("_", 1)[0]
        if kind not in ATTENTION:
            continue
        types = [n["opType"] for n in graph["nodes"]]
        assert types == [t or ATTENTION[kind] for t in LAYER_TYPES], name
        assert graph["opType"] == kind and graph["param"] == ""
        gid = name.rsplit("_", 1)[1]
        expected = [f"{t}_{gid}_{i}" for i, t in enumerate(types)]
        assert [n["opName"] for n in graph["nodes"]] == expected
        assert graph["nodes"][4]["outTensorIds"] == [6, 7]  # KV cache written in place
        event = graph["nodes"][8]
        assert (event["inTensorNum"], event["outTensorNum"]) == (0, 0)
        assert event["inTensorIds"] == [] and event["outTensorIds"] == []
    topo = {c["args"]["model"]: json.loads(c["args"]["graph"])
            for c in res.of("ReportModelTopoInfo")}
    assert set(topo) == {"DecoderModel_Prefill", "DecoderModel_Decoder"}
    assert [n["opName"] for n in topo["DecoderModel_Prefill"]["nodes"]] == [
        "WordEmbedding", "Prefill_layer", "Prefill_layer", "Prefill_layer", "LmHead"]
    assert [n["opName"] for n in topo["DecoderModel_Decoder"]["nodes"]] == [
        "WordEmbedding", "Decoder_layer", "Decoder_layer", "Decoder_layer", "LmHead"]
    for t in topo.values():
        assert len(t["kCacheTensors"]) == len(t["vCacheTensors"]) == 3
        assert len(t["weightTensors"]) == 1 + 6 * 3 + 2


def kernel_dirs(res, stage: str) -> set[tuple[str, str]]:
    """(node dir, kernel dir) pairs under the layer graphs of one stage."""
    out = set()
    for t in res.trace:
        parts = rel(t["path"]).split("/")
        if len(parts) >= 5 and parts[1].endswith("_" + stage) and parts[4] in ("before", "after"):
            out.add((parts[2], parts[3]))
    return out


@pytest.mark.parametrize("dtype,add,gather", [("fp16", "AddF16Kernel", "Gather16I64Kernel"),
                                              ("fp32", "AddF32Kernel", "Gather32I64Kernel"),
                                              ("bf16", "AddBF16Kernel", "Gather16I64Kernel")])
def test_kernel_names(atbsim_paths, run_host, dtype, add, gather):
    res = run_model(run_host, atbsim_paths, 1, "--dtype", dtype, "--decode-steps", "1")
    common = {("0_RmsNormOperation", "0_RmsNormKernel"), ("1_LinearOperation", "0_MatMulKernel"),
              ("2_SplitOperation", "0_SplitKernel"), ("3_RopeOperation", "0_RopeKernel"),
              ("3_RopeOperation", "1_RopeKernel"),
              ("4_ReshapeAndCacheOperation", "0_ReshapeAndCacheNdKernel"),
              ("7_ElewiseOperation", f"0_{add}"), ("11_ActivationOperation", "0_SwiGluKernel"),
              ("13_ElewiseOperation", f"0_{add}")}
    prefill, decode = kernel_dirs(res, "Prefill_layer"), kernel_dirs(res, "Decoder_layer")
    assert common | {("5_SelfAttentionOperation", "0_FlashAttentionKernel")} <= prefill
    assert common | {("5_PagedAttentionOperation", "0_PagedAttentionKernel")} <= decode
    assert not any(node.startswith("8_") for node, _ in prefill | decode)  # Event: no kernels
    assert any(f"0_WordEmbedding/0_GatherOperation/0_{gather}/" in t["path"] for t in res.trace)
    mki = {(c["args"]["opName"]) for c in res.of("ReportKernelIOTensor")}
    assert {"MatMulOperation", "NormOperation", "PagedAttentionOperation"} <= mki


def test_ir_file_names_and_params(atbsim_paths, run_host):
    res = run_model(run_host, atbsim_paths, 1, "--decode-steps", "0")
    files: dict[str, set[str]] = {}
    for t in res.trace:
        d, name = rel(t["path"]).rsplit("/", 1)
        files.setdefault(d, set()).add(name)
    assert files["0/1_Prefill_layer/1_LinearOperation/after"] == {
        "intensor0_x.bin", "intensor1_weight.bin", "outtensor0_output.bin"}
    assert files["0/1_Prefill_layer/1_LinearOperation/0_MatMulKernel/after"] == {
        "intensor0.bin", "intensor1.bin", "outtensor0.bin"}
    assert files["0/1_Prefill_layer/after"] == {f"intensor{i}.bin" for i in range(14)} | {
        "outtensor0.bin"}
    assert files["0/1_Prefill_layer/3_RopeOperation/after"] == {
        "intensor0_query.bin", "intensor1_key.bin", "intensor2_cos.bin", "intensor3_sin.bin",
        "intensor4_seqlen.bin",
        "outtensor0_ropeQuery.bin", "outtensor1_ropeKey.bin"}
    assert files["0/1_Prefill_layer/4_ReshapeAndCacheOperation/after"] == {
        "intensor0_key.bin", "intensor1_value.bin", "intensor2_keyCache.bin",
        "intensor3_valueCache.bin", "intensor4_slotMapping.bin", "outtensor0_keyCacheOut.bin",
        "outtensor1_valueCacheOut.bin"}
    assert not any("8_EventOperation" in d for d in files)  # no tensors at all
    params = {rel(c["args"]["path"]): c["args"]["param"] for c in res.of("SaveParam")}
    assert params["0/1_Prefill_layer/1_LinearOperation/op_param.json"] == (
        '{"hasBias":false,"outDataType":-1,"transposeA":false,"transposeB":true}')
    assert params["0/1_Prefill_layer/8_EventOperation/op_param.json"] == (
        '{"event":0,"operatorType":1}')
    assert json.loads(params["0/1_Prefill_layer/5_SelfAttentionOperation/op_param.json"])[
        "headNum"] == 4
    assert not any(p.endswith("Prefill_layer/op_param.json") for p in params)  # graphs: none


def test_requests_advance_rounds(atbsim_paths, run_host):
    res = run_model(run_host, atbsim_paths, 1, "--requests", "3", "--decode-steps", "2")
    toks = tokens_of(res.stdout)
    assert len(toks) == 3 and toks[0] == toks[1] == toks[2]
    rounds: dict[str, set[int]] = {}
    for t in res.trace:
        exec_dir, top = rel(t["path"]).split("/")[:2]
        rounds.setdefault(top, set()).add(int(exec_dir))
    assert rounds["1_Prefill_layer"] == {0, 1, 2}  # one prefill per request
    assert rounds["6_Decoder_layer"] == set(range(6))  # decode steps counted across requests


def first_difference(clean, poisoned) -> str:
    a = [(rel(t["path"]), t["fnv1a64"]) for t in clean.trace]
    b = [(rel(t["path"]), t["fnv1a64"]) for t in poisoned.trace]
    assert [p for p, _ in a] == [p for p, _ in b]  # same calls, same order
    return next(pa for (pa, ha), (_, hb) in zip(a, b) if ha != hb)


@pytest.mark.parametrize("spec,kernel_path,overflow", [
    ("nan:layer=1,op=SwiGLU,stage=decode,round=1",
     "1/6_Decoder_layer/11_ActivationOperation/0_SwiGluKernel/after/outtensor0.bin",
     None),  # NaN is never an overflow to ATB's scan
    ("inf:layer=0,op=QKV,round=0",
     "0/1_Prefill_layer/1_LinearOperation/0_MatMulKernel/after/outtensor0.bin",
     "LinearOperation_1_1:MatMulKernel"),
    ("-inf:op=WordEmbedding,stage=decode,round=2,elem=5",
     "2/4_WordEmbedding/0_GatherOperation/0_Gather16I64Kernel/after/outtensor0.bin",
     "GatherOperation_4_0:Gather16I64Kernel"),
])
def test_injection_lands_exactly_where_asked(abi, atbsim_paths, run_host, spec, kernel_path,
                                             overflow):
    args = ["--layers", "2", "--decode-steps", "3"]
    clean = run_model(run_host, atbsim_paths, abi, *args)
    poisoned = run_model(run_host, atbsim_paths, abi, *args, "--inject", spec)
    # Every tensor saved before the poisoned kernel's output is bit-identical.
    assert first_difference(clean, poisoned) == kernel_path
    # The op-level output named in the message differs too, and the runtime's
    # overflow check names the same kernel first (an Inf).
    printed = INJECTED.findall(poisoned.stderr)
    assert len(printed) == 1
    before = {rel(t["path"]): t["fnv1a64"] for t in clean.trace}
    after = {rel(t["path"]): t["fnv1a64"] for t in poisoned.trace}
    assert before[rel(printed[0])] != after[rel(printed[0])]
    reported = [c["args"]["kernel"] for c in poisoned.of("ReportOverflowKernel")]
    assert reported[:1] == ([overflow] if overflow else [])
    assert not clean.of("ReportOverflowKernel")


@pytest.mark.parametrize("dtype,kind,reported", [
    ("fp16", "inf", True),  # an fp16 Inf: reported
    ("fp16", "nan", False),  # NaN is never an overflow to ATB
    ("fp32", "-inf", True),  # fp32: std::isinf
    ("fp32", "nan", False),
    ("bf16", "inf", False),  # bf16 +Inf (0x7F80) reads as an fp16 NaN: missed
    ("bf16", "value=-0x1p121", True),  # finite bf16 0xFC00 reads as an fp16 -Inf: reported
])
def test_overflow_scan_reads_outputs_as_real_atb(atbsim_paths, run_host, dtype, kind, reported):
    """ATB's overflow scan (docs/atbsim_model.md): fp16 and bf16 read as fp16, Inf only."""
    res = run_model(run_host, atbsim_paths, 1, "--layers", "2", "--hidden", "32", "--vocab",
                    "64", "--decode-steps", "0", "--dtype", dtype, "--inject",
                    f"{kind}:layer=1,op=SwiGLU", answers="defaults,IsOverflowCheck=1")
    kernels = [c["args"]["kernel"] for c in res.of("ReportOverflowKernel")]
    assert kernels[:1] == (["ActivationOperation_2_11:SwiGluKernel"] if reported else [])


def test_kv_cache_is_written_in_place(atbsim_paths, run_host):
    args = ["--decode-steps", "2"]
    clean = run_model(run_host, atbsim_paths, 1, *args)
    poisoned = run_model(run_host, atbsim_paths, 1, *args, "--inject",
                         "nan:layer=0,op=ReshapeAndCache,out=1,elem=3")
    # valueCacheOut is the valueCache input: after the kernel, input 3 shows the NaN first.
    assert first_difference(clean, poisoned) == (
        "0/1_Prefill_layer/4_ReshapeAndCacheOperation/0_ReshapeAndCacheNdKernel/after/intensor3.bin")
    # The prefill attends over its own K/V; only decode steps read the poisoned cache.
    a, b = tokens_of(clean.stdout)[0], tokens_of(poisoned.stdout)[0]
    assert a[0] == b[0] and a[1:] != b[1:]


def test_injection_nan_reaches_the_logits(atbsim_paths, run_host, tmp_path):
    out = tmp_path / "l.f32"
    run_model(run_host, atbsim_paths, 0, "--dtype", "fp32", "--decode-steps", "2", "--inject",
              "nan:layer=0,op=Attention,stage=decode,round=0", "--logits-out", out, probe=False)
    logits = np.fromfile(out, dtype="<f4").reshape(3, 256)
    assert np.isfinite(logits[0]).all()  # the prefill is clean
    assert np.isnan(logits[1]).all()  # the poisoned decode step's hidden state is NaN throughout


def test_injection_stop_on_overflow_fails_the_request(atbsim_paths, run_host):
    res = run_host([atbsim(atbsim_paths, 0), "run", "--inject", "inf:layer=0,op=Down"],
                   preload=atbsim_paths.recording_probe(0), answers="all-true")
    assert res.returncode == 1
    assert "DecoderModel_Prefill execute failed" in res.stderr


def test_unreached_injection_is_reported(atbsim_paths, run_host):
    res = run_model(run_host, atbsim_paths, 0, "--inject", "nan:layer=0,op=Down,round=5",
                    probe=False)
    assert "never fired" in res.stderr and "round 5" in res.stderr


def test_async_gives_the_same_tokens(abi, atbsim_paths, run_host):
    sync = run_model(run_host, atbsim_paths, abi, "--decode-steps", "4")
    asyn = run_model(run_host, atbsim_paths, abi, "--decode-steps", "4", "--async")
    assert tokens_of(asyn.stdout) == tokens_of(sync.stdout)
    # Kernels ran on the async worker thread, not the main thread.
    main_tid = asyn.pid
    assert {c["tid"] for c in asyn.of("ReportKernelIOTensor")} - {main_tid}
    assert [rel(t["path"]) for t in asyn.trace] == [rel(t["path"]) for t in sync.trace]


def test_no_compute_keeps_real_shapes(atbsim_paths, run_host):
    res = run_model(run_host, atbsim_paths, 1, "--no-compute", "--hidden", "512", "--heads", "8",
                    "--prompt-len", "300", "--vocab", "1000", "--decode-steps", "1",
                    "--layers", "2")
    dims = {rel(t["path"]): t["dims"] for t in res.trace}
    assert dims["0/1_Prefill_layer/1_LinearOperation/after/outtensor0_output.bin"] == "300,1536"
    assert dims["0/1_Prefill_layer/after/intensor6.bin"] == "3,128,8,64"  # KV cache blocks
    assert dims["0/6_Decoder_layer/10_LinearOperation/after/outtensor0_output.bin"] == "1,2048"
    assert all(0 <= t < 1000 for t in tokens_of(res.stdout)[0])
    # cheap varying data, so a benchmark's dump is not mostly identical tensors:
    # every op's output and every layer weight differs from all the others
    saved = [(rel(c["args"]["path"]), c["args"]["fnv1a64"]) for c in res.of("SaveTensor")]
    outs = {h for p, h in saved if len(p.split("/")) == 5 and "/after/outtensor" in p}
    weights = {h for p, h in saved
               if re.fullmatch(r"0/1_Prefill_layer/before/intensor(8|9|1[0-3])\.bin", p)}
    assert len(outs) == len({p for p, _ in saved if len(p.split("/")) == 5
                             and "/after/outtensor" in p}) > 20
    assert len(weights) == 6
