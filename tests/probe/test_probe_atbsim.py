"""End to end: the stand-in ATB (atbsim) under LD_PRELOAD of the real shim,
for both ABIs. Configs are published by the test (it holds daemon.lock, so no
control plane runs); one test lets the shim start the real control plane."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from probe_helpers import (
    Dump,
    decode,
    norm,
    oracle_selected,
    read_bin,
    real_payload,
    runner_dir,
)
from testkit import REPO, atbsim_bin, fnv1a64, shim_lib

from msprobe_atb.tree.records import record_float

pytestmark = pytest.mark.usefixtures("need_atbsim")

MODEL = ("--layers", "2", "--decode-steps", "2", "--prompt-len", "6")
EVERYTHING = {"dump_enable": True, "task": "tensor", "exec_range": "all", "save_child": True,
              "filter_level": 0, "save_all_stages": True}


@pytest.fixture(scope="module")
def full_runs(tmp_path_factory):
    """Per ABI, one run that selects every tensor: the universe the filters pick from."""
    runs = {}
    for abi in (0, 1):
        if not atbsim_bin(abi).exists():
            continue
        d = Dump(tmp_path_factory.mktemp(f"full{abi}"))
        d.publish(EVERYTHING)
        d.atbsim(abi, *MODEL)
        d.close()
        runs[abi] = d
    return runs


def test_every_tensor_arrives_byte_exact(full_runs, abi):
    d = full_runs[abi]
    trace = d.trace()
    recs = d.tensors()
    assert trace and len(recs) == len(trace)
    assert {r["file"] for r in recs} == {"bin"}
    by_path = {t["path"]: t for t in trace}
    assert len(by_path) == len(trace), "atbsim reuses no path within a run"
    assert {r["path"] for r in recs} == set(by_path)
    for r in recs:
        t = by_path[r["path"]]
        attrs, payload = read_bin(d.data / r["path"])
        assert fnv1a64(payload) == t["fnv1a64"], r["path"]
        assert (attrs["format"], attrs["dtype"], attrs["dims"]) == (t["format"], t["dtype"],
                                                                   t["dims"])
        assert int(attrs["$Object.Length"]) == t["size"] == len(payload)
    # seq follows SaveTensor call order
    assert [r["path"] for r in sorted(recs, key=lambda r: r["seq"])] == [t["path"] for t in trace]
    # nothing outside the dump root; every file is a .bin or op_param.json
    assert sorted(os.listdir(d.out)) == ["atb_dump_data"]
    assert all(f.endswith((".bin", "op_param.json")) for f in d.files())
    params = [r for r in d.records() if r["k"] == "param"]
    assert params and all((d.data / p["path"]).read_text().endswith("}\n") for p in params)
    kinds = {r["k"] for r in d.records()}
    assert {"attach", "wake", "graph", "topo", "exit"} <= kinds


FILTERS = [
    {},
    {"exec_range": "1,1"},
    {"exec_range": "0,0,2,2", "save_child": True},
    {"ids": "1", "save_child": True},
    {"ids": "1_2,4"},
    {"op_name": "linear"},
    {"op_name": "rmsnorm,lmhead", "save_child": True},
    {"ids": "2", "op_name": "rope", "save_child": True},
    {"device": "1", "save_child": True},
    {"exec_range": "none"},
]


@pytest.mark.parametrize("flt", FILTERS, ids=lambda c: json.dumps(c, sort_keys=True))
def test_dumped_set_is_exactly_what_the_filters_select(tmp_path, full_runs, abi, flt):
    raw = {"dump_enable": True, "task": "tensor", "exec_range": "all", "filter_level": 0, **flt}
    d = Dump(tmp_path)
    try:
        d.publish(raw)
        d.atbsim(abi, *MODEL)
    finally:
        d.close()
    universe = {norm(t["path"]) for t in full_runs[abi].trace()}
    asked = {p for p in universe if oracle_selected(runner_dir(p), raw)}
    nothing = flt.get("device") == "1" or flt.get("exec_range") == "none"
    assert bool(asked) != nothing and asked != universe
    assert {norm(t["path"]) for t in d.trace()} == asked  # ATB asked for nothing else
    # of which the default set is saved: inputs before, outputs after
    want = {p for p in asked if re.search(r"/(before/intensor|after/outtensor)[^/]*$", p)}
    assert bool(want) == bool(asked)
    assert {norm(r["path"]) for r in d.tensors("bin")} == want
    assert not d.tensors("lost")


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_statistics_agree_with_numpy(dump, abi, dtype):
    dump.publish({"dump_enable": True, "task": "all", "exec_range": "0,0", "save_child": True,
                  "filter_level": 1})
    dump.atbsim(abi, "--layers", "1", "--decode-steps", "0", "--dtype", dtype,
                "--inject", "nan:layer=0,op=SwiGLU,elem=3", "--inject", "-inf:layer=0,op=Rope")
    recs = [r for r in dump.tensors() if r["stats"]]
    assert recs and {r["file"] for r in recs} == {"bin", "linked"}
    seen_nan = seen_ninf = False
    for r in recs:
        a = decode(real_payload(dump, r["path"]), r["dtype"]).astype(np.float64)
        st = r["stats"]
        assert st["count"] == a.size
        nan = int(np.isnan(a).sum())
        assert (st["nan"], st["pinf"], st["ninf"], st["zero"]) == (
            nan, int(np.isposinf(a).sum()), int(np.isneginf(a).sum()), int((a == 0).sum()))
        all_nan = nan == a.size
        for key, want in (("max", np.nan if all_nan else np.nanmax(a)),
                          ("min", np.nan if all_nan else np.nanmin(a)),
                          ("mean", a.mean()), ("norm", np.sqrt((a * a).sum()))):
            got = record_float(st[key])  # hex floats; "nan", "inf", "-inf" too
            if np.isfinite(want):
                assert got == pytest.approx(want, rel=1e-9, abs=1e-300), (key, r["path"])
            else:
                assert np.isnan(got) if np.isnan(want) else got == want, (key, r["path"])
        seen_nan |= nan > 0
        seen_ninf |= st["ninf"] > 0
    assert seen_nan and seen_ninf


def test_async_mode_dumps_the_same_tensors(dump, full_runs, abi):
    dump.publish(EVERYTHING)
    dump.atbsim(abi, *MODEL, "--async")
    trace = {t["path"]: t["fnv1a64"] for t in dump.trace()}
    recs = dump.tensors()
    assert {r["file"] for r in recs} == {"bin"}
    assert {r["path"] for r in recs} == set(trace)
    assert {norm(p) for p in trace} == {norm(t["path"]) for t in full_runs[abi].trace()}
    for r in recs:
        assert fnv1a64(read_bin(dump.data / r["path"])[1]) == trace[r["path"]]


def test_other_abi_is_reported_loudly(dump, abi):
    dump.publish(EVERYTHING)
    p = dump.atbsim(abi, *MODEL, shim_abi=1 - abi)
    assert p.stderr.count("C++ ABI mismatch") == 1
    assert f"cxx_abi_{abi}" in p.stderr and "NOTHING will be dumped" in p.stderr
    assert "Ready to dump" not in p.stdout + p.stderr  # it will not, so it does not say so
    [att] = [r for r in dump.records() if r["k"] == "attach"]
    assert (att["abi"], att["host_abi"]) == (1 - abi, abi)
    assert not dump.tensors()
    from msprobe_atb.control.block import PROC_ABI_MISMATCH, ControlBlock

    with ControlBlock(dump.root) as block:
        assert any(s.flags & PROC_ABI_MISMATCH for s in block.procs())


def test_overflow_task_dumps_the_overflowing_kernel(dump, abi):
    dump.publish({"dump_enable": True, "task": "overflow_check", "exec_range": "all",
                  "overflow_check": {"overflow_nums": 1}})
    p = dump.atbsim(abi, *MODEL, "--inject", "inf:layer=1,op=SwiGLU")
    kernel = re.search(r"\((\w+_\d+_\d+:\w+)\)", p.stderr).group(1)
    ov = [r for r in dump.records() if r["k"] == "overflow"]
    assert [r["kernel"] for r in ov] == [kernel]
    recs = dump.tensors("bin")
    assert recs
    op_type, ids = kernel.split(":")[0].split("_", 1)[0], kernel.split(":")[0].split("_")[1:]
    for r in recs:
        segs = runner_dir(r["path"]).split("/")
        assert "/after/" in r["path"] and segs[-1].endswith(kernel.split(":")[1])
        assert [s.split("_")[0] for s in segs[2:-1]] == ids and op_type in segs[-2]
        assert r["stats"] is not None
    assert any(r["stats"]["pinf"] for r in recs)


def test_serve_with_two_devices_and_a_device_filter(dump, abi):
    dump.publish({**EVERYTHING, "device": "1"})
    env = dump.env(LD_PRELOAD=str(shim_lib(abi)))
    srv = subprocess.Popen([str(atbsim_bin(abi)), "serve", "--port", "0", "--devices", "2",
                            "--layers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, start_new_session=True)
    try:
        port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = srv.stdout.readline()
            m = re.search(r"Listening on 127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else port
            if "Daemon start success!" in line:
                break
        assert port
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                           "max_tokens": 2}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            answer = json.loads(resp.read())
        assert len(answer["worker_pids"]) == 2
    finally:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.communicate(timeout=60)
    devs = {p.split("/")[0].split("_")[0] for p in (r["path"] for r in dump.tensors())}
    assert devs == {"1"}
    attached = {r["pid"] for r in dump.records() if r["k"] == "attach"}
    assert set(answer["worker_pids"]) <= attached
    # graph records carry the worker's device from aclrtGetDevice
    for f in (dump.root / ".probe" / "records").glob("*.jsonl"):
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        paths = [r["path"] for r in recs if r["k"] == "tensor"]
        graphs = [r for r in recs if r["k"] == "graph"]
        if paths:
            assert graphs and {g["dev"] for g in graphs} == {int(paths[0].split("_")[0])}


def test_the_shim_starts_the_control_plane_which_builds_the_csv(tmp_path, abi):
    d = Dump(tmp_path, locked=False)
    d.config.write_text(json.dumps({"dump_enable": True, "task": "all", "exec_range": "0,0"}))
    d.atbsim(abi, "--layers", "1", "--decode-steps", "0", MSPROBE_ATB_ATTACH_WAIT_MS="20000")
    try:
        w = subprocess.run([sys.executable, "-m", "msprobe_atb", "wait", str(d.out),
                            "--timeout", "30"], cwd=REPO, capture_output=True, text=True,
                           timeout=60)
    finally:
        subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                        str(d.out)], cwd=REPO, capture_output=True, timeout=60)
    assert w.returncode == 0, w.stderr + (d.root / ".probe" / "daemon.log").read_text()
    csvs = list(d.data.glob("*/0/ROUND_COMPLETE.json"))  # there when wait returns
    assert csvs
    rows = (csvs[0].parent / "statistic.csv").read_text().splitlines()
    assert len(rows) - 1 == len(d.tensors("bin"))
