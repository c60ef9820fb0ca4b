"""The hooks called directly by a tiny ATB stand-in (native/tests/probe_host.cpp
linked against the real shim), with configs published into the control block
by the test itself: no atbsim, no daemon."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from probe_helpers import Dump, HeldThreads, host_bin, oracle_selected, read_bin
from testkit import REPO, shim_messages, wait_until

from msprobe_atb.tree.records import record_float

AWAKE = {"dump_enable": True, "task": "all", "exec_range": "all"}
L = "0_7/0/2_Layer"


def say(p: subprocess.CompletedProcess) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in p.stdout.splitlines():
        if "=" in line and not line.startswith("["):
            k, v = line.rsplit("=", 1)
            out.setdefault(k, []).append(int(v))
    return out


def f16(*vals: float) -> str:
    return "hex:" + np.array(vals, dtype=np.float16).tobytes().hex()


def test_asleep_hooks_say_no_and_write_nothing(dump, abi):
    dump.publish({"dump_enable": False, "task": "all", "exec_range": "all"})
    p = dump.host(abi, ["update", ["need", "Layer"], "desc", "data", ["range", 0], "before",
                        "after", ["dir", L], "isparam", "ovcheck", "graphen",
                        ["save", 2, 1, 1, f16(1), f"{L}/before/intensor0.bin"]])
    # desc 0: asleep, ATB need not build the dump directory strings at every setup
    assert say(p) == {"need": [1], "desc": [0], "data": [0], "range": [0], "before": [0],
                      "after": [0], "dir": [0], "isparam": [0], "ovcheck": [0], "graphen": [1]}
    assert "Ready to dump" not in p.stdout
    assert not dump.data.exists()
    kinds = [r["k"] for r in dump.records()]
    assert kinds == ["attach", "exit"]


@pytest.mark.parametrize("config, desc", [
    ({"dump_enable": True, "exec_range": "none"}, 0),
    ({"dump_enable": True, "exec_range": "0,3"}, 1),
    ({"dump_enable": True, "exec_range": "none", "task": "overflow_check"}, 1),
])
def test_paths_are_asked_for_only_while_something_can_be_selected(dump, abi, config, desc):
    dump.publish(config)
    assert say(dump.host(abi, ["update", ["need", "Layer"], "desc"]))["desc"] == [desc]


@pytest.mark.parametrize("config, desc, need", [
    # ids alone: ops 2 and 7 only, children included; 7's own saves are not selected
    ({"ids": "2,7_1"}, [1, 0, 1, 1], [1, 0, 0, 1]),
    # an op_name may pick a child of any op, not these ops' own dirs
    ({"ids": "2", "op_name": "lin"}, [1, 1, 1, 1], [1, 0, 0, 1]),
    # kernels are named by their dirs
    ({"ids": "2", "task": "overflow_check"}, [1, 1, 1, 1], [1, 1, 1, 1]),
])
def test_a_top_level_op_the_ids_exclude_gets_no_paths(dump, config, desc, need):
    """ATB asks IsSaveTensorDesc right after IsTensorNeedSave in each op's Setup:
    an op that the `ids` filter cannot select is told to build no directories,
    which is most of what an awake probe costs a model's ops it does not dump."""
    dump.publish({"dump_enable": True, **config})
    script = ["update"] + [line for top in (2, 3, 7, 2) for line in (["need", "Layer", top],
                                                                     "desc")]
    got = say(dump.host(1, script))
    assert got["desc"] == desc and got["need"] == need
    # and the tensors of a selected op are still saved under its paths
    dump.host(1, [["save", 2, 4, "1", "fill:1:1", "0_7/0/2_Layer/before/intensor0.bin"]])
    assert [r["file"] for r in dump.tensors()] == ["bin"]


def test_a_top_level_op_is_told_by_its_own_verdict_only(dump, abi):
    """IsSaveTensorDesc answers from the verdict each top-level IsTensorNeedSave
    takes on its thread: a child's or a kernel's call (ids of two or more, asked
    once and cached by ATB) leaves it, a thread that never set up a top-level op
    is told yes, an op the ids select is told yes right after one they exclude
    (and the other way round), ids past the bitmap are looked up in the list,
    and the verdict follows a config published between two setups."""
    dump.publish({"dump_enable": True, "ids": "2,5000"})
    script = ["update",
              ["need", "Layer", 3], ["need", "Linear", "2_0"], "desc",
              ["need", "Layer", 2], ["need", "Linear", "3_0"], "desc",
              ["need", "Layer", 3], ["thread", "desc"], "desc",
              ["need", "Layer", 5000], "desc", ["need", "Layer", 5001], "desc",
              ["publish", "ids=3"], ["need", "Layer", 3], "desc", ["need", "Layer", 2], "desc",
              ["publish", "exec=none"], ["need", "Layer", 3], "desc"]
    assert say(dump.host(abi, script))["desc"] == [0, 1, 1, 0, 1, 0, 1, 0, 0]


TOPS = [(2, "Layer"), (3, "LmHead"), (5, "lmhead_2"), (7, "Prefill_5"), (50, "RopeOperation"),
        (5000, "LmHead"), (5001, "Layer")]


@pytest.mark.parametrize("config", [
    {}, {"save_child": True}, {"device": "1"}, {"exec_range": "0,3"},
    {"op_name": "lmhead"}, {"op_name": "LMHEAD,rope", "save_child": True},
    {"ids": "2,7_0"}, {"ids": "2_0", "save_child": True}, {"ids": "50,5001", "op_name": "layer"},
    {"ids": "5", "op_name": "prefill", "save_child": True, "device": "0"},
    # the runner's own saves need more than the filters: every op yes, as before
    {"op_name": "lmhead", "task": "overflow_check"}, {"ids": "3", "next": "next=7:1"},
    {"op_name": "lmhead", "recorder": {"triggers": ["nan"]}},
], ids=lambda c: json.dumps(c, sort_keys=True))
def test_a_top_level_op_is_told_to_save_only_what_the_filters_can_select(dump, config):
    """A top-level op's IsTensorNeedSave (asked at every Setup) gates only its
    runner's own saves: it says no when the filters cannot select the op's own
    directory, as IsSaveTensorInSpecificDir would say of it. The answer is decided
    at the op's first setup under a config and then read from a table: each op is
    set up three times, the first (and every op past the table) on the slow path,
    the others from the table, and each answer must be the rules'. Children and
    kernels (ids of two or more, asked once) are always told yes."""
    config = dict(config)
    next_request = config.pop("next", None)  # exec_range "next" as the control plane publishes it
    raw = {"dump_enable": True, "exec_range": "all", **config}
    dump.publish(raw)
    script = ["update"] + ([["publish", next_request]] if next_request else [])
    script += [["need", name, top] for _ in range(3) for top, name in TOPS]
    script += [["need", "Linear", "3_0"], ["need", "Linear", "3_0_1"]]
    got = say(dump.host(1, script))["need"]
    exempt = "task" in config or "recorder" in config or next_request is not None
    own = [exempt or oracle_selected(f"0_7/0/{top}_{name}", {**raw, "device": ""})
           for top, name in TOPS]
    assert got == [int(x) for x in own * 3] + [1, 1], got


def test_a_top_level_ops_answer_follows_the_config(dump, abi):
    """The table is the snapshot's: an op told no is told yes at its first setup
    after a publish that selects it, and the other way round, on any thread."""
    dump.publish({"dump_enable": True, "exec_range": "all", "op_name": "lmhead"})
    script = ["update", ["need", "LmHead", 3], ["need", "Layer", 2], ["need", "Layer", 2],
              ["publish", "names=layer"], ["need", "LmHead", 3], ["need", "Layer", 2],
              ["thread", "need", "Layer", 2], ["publish", "names="], ["need", "LmHead", 3],
              ["need", "LmHead", 3]]
    assert say(dump.host(abi, script))["need"] == [1, 0, 0, 0, 1, 1, 1, 1]


ASKED = ["desc", "data", ["range", 0], ["range", 5], "before", "after", "isparam", "ovcheck"]


@pytest.mark.parametrize("config, answers", [
    ({"dump_enable": False}, [0, 0, 0, 0, 0, 0, 0, 0]),
    ({"exec_range": "none"}, [0, 0, 0, 0, 0, 0, 0, 0]),
    ({"exec_range": "all", "ids": "2"}, [1, 1, 1, 1, 1, 1, 1, 0]),
    ({"exec_range": "0,2"}, [1, 1, 1, 0, 1, 1, 1, 0]),
    ({"exec_range": "5,6"}, [1, 1, 0, 1, 1, 1, 1, 0]),
    ({"exec_range": "none", "task": "overflow_check"}, [1, 1, 1, 1, 0, 0, 0, 1]),
])
def test_each_predicate_answers_as_its_config_says_and_none_after_sleep(dump, config, answers):
    """The answerers picked once per publish (constants where the config decides
    alone, all "no" asleep, else the hooks' own) answer as the config says; a
    publish back to sleep turns every one to no."""
    dump.publish({"dump_enable": True, "task": "all", **config})
    script = ["update", ["need", "Layer", 2], *ASKED,
              ["publish", "state=0"], ["need", "Layer", 2], *ASKED]
    got = [int(line.rsplit("=", 1)[1]) for line in dump.host(1, script).stdout.splitlines()
           if "=" in line and not line.startswith(("[", "need"))]
    assert got == answers + [0] * len(ASKED)


@pytest.mark.parametrize("config, answers", [
    ({"exec_range": "0,2"}, [1, 1, 1, 0, 1, 1, 1, 0]),
    ({"exec_range": "none", "task": "overflow_check"}, [1, 1, 1, 1, 0, 0, 0, 1]),
])
@pytest.mark.parametrize("first", range(len(ASKED)))
def test_a_predicate_asked_before_any_other_hook_attaches_and_answers(dump, abi, config,
                                                                      answers, first):
    """Whichever predicate a host asks first (ATB's context init asks
    IsOverflowCheck before any op) attaches the process and gives the answer the
    config in force gives, not a "no" for the call that attached."""
    dump.publish({"dump_enable": True, "task": "all", **config})
    p = dump.host(abi, [ASKED[first]])
    assert [int(v) for v in say(p).popitem()[1]] == [answers[first]]
    assert [r for r in dump.records() if r["k"] == "attach"]


def test_without_config_the_process_stays_out(tmp_path, abi):
    d = Dump(tmp_path)
    try:
        p = d.host(abi, ["update", ["need", "X"], "desc", "graphen"], ATB_DUMP_CONFIG="")
        assert say(p) == {"need": [0], "desc": [0], "graphen": [0]}
        assert "ATB_DUMP_CONFIG is not set" in p.stderr
        assert not (d.root / ".probe" / "records").exists()
    finally:
        d.close()


def test_refused_block_stays_asleep_and_says_why(dump, abi):
    (dump.root / ".probe" / "control.block").write_bytes(b"\0" * 100)
    p = dump.host(abi, ["update", ["need", "X"], ["range", 0]])
    assert say(p) == {"need": [0], "range": [0]}
    assert "remove the .probe directory" in p.stderr


DIRS = [L, "0_7/0/50_Layer", "0_7/0/2_Layer/0_LinearOperation",
        "0_7/0/2_Layer/1_LinearOperation/0_MatMulKernel", "0_7/0/2_Layer/10_Rope",
        "0_7/3/5_Prefill_layer", "0_7/3/5_Prefill_layer/2_RmsNorm", "1_7/0/2_Layer",
        "0_7/1/7_Prefill_5/0_Linear", "0_7/0", "0_7/0/NoId"]
CONFIGS = [
    {},
    {"save_child": True},
    {"ids": "2"},
    {"ids": "2", "save_child": True},
    {"ids": "2_1,5"},
    {"ids": "5", "save_child": True, "exec_range": "3,3"},
    {"op_name": "linear"},
    {"op_name": "LINEAR,rms", "save_child": True},
    {"ids": "50", "op_name": "rope"},
    {"device": "1"},
    {"exec_range": "0,0,3,4"},
    {"exec_range": "none"},
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: json.dumps(c, sort_keys=True))
def test_selection_matches_the_rules(dump, cfg):
    raw = {"dump_enable": True, "task": "all", "exec_range": "all", **cfg}
    dump.publish(raw)
    lines = ["update"]  # as in ATB, an op's setup comes before its execute-time predicates
    for d in DIRS:
        count = d.split("/")[1]
        lines += [["range", count], ["dir", d]]
    got = say(dump.host(1, lines))
    for i, d in enumerate(DIRS):
        want = oracle_selected(d, raw)
        assert bool(got["range"][i] and got["dir"][i]) == want, (d, raw)


def test_tensor_bin_record_and_stats(dump, abi):
    dump.publish(AWAKE)
    vals = [1.0, -2.5, 0.0, 65504.0, float("inf"), 6e-8]
    src = f16(*vals)
    path = f"{L}/before/intensor0_x.bin"
    p = dump.host(abi, [["save", 2, 1, "2,3", src, path]])
    assert p.stdout.count("Ready to dump ATB data, the running speed of the model will be "
                          "affected") == 1
    blob = (dump.data / path).read_bytes()
    payload = np.array(vals, dtype=np.float16).tobytes()
    assert blob == (b"$Version=1.0\n$Object.Count=1\n$Object.Length=12\nformat=2\ndtype=1\n"
                    b"dims=2,3\n$Object.data=0,12\n$End=1\n" + payload)
    assert (os.stat(dump.data / path).st_mode & 0o777) == 0o640
    [rec] = dump.tensors()
    assert rec["file"] == "bin" and rec["task"] == "all" and rec["path"] == path
    assert (rec["format"], rec["dtype"], rec["dims"], rec["size"]) == (2, 1, "2,3", 12)
    st = rec["stats"]
    assert st["count"] == 6 and st["max"] == "inf" and record_float(st["min"]) == -2.5
    assert st["pinf"] == 1 and st["zero"] == 1 and st["nan"] == 0
    assert st["mean"] == "inf" and st["norm"] == "inf"
    # the smallest fp16 subnormal survives with full precision
    p = dump.host(abi, [["save", 2, 1, "1", f16(6e-8), f"{L}/after/outtensor0.bin"]])
    small = [r for r in dump.tensors() if r["path"].endswith("outtensor0.bin")][0]["stats"]
    assert small["max"] == "0x1p-24"  # exact: float.hex's form less its trailing zeros
    assert record_float(small["max"]) == float(np.float16(6e-8)) == 5.960464477539063e-08


def _cached_pages(path) -> list[bool]:
    """Which pages of the file are in the page cache (mincore of a mapping,
    which faults nothing in)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    n = os.stat(path).st_size
    pages = (n + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, n, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        vec = ctypes.create_string_buffer(pages)
        assert libc.mincore(addr, n, vec) == 0
        libc.munmap(addr, n)
    finally:
        os.close(fd)
    return [b & 1 == 1 for b in vec.raw]


def test_large_tensors_go_to_disk_with_o_direct_as_the_same_files(dump):
    """A tensor of 1 MiB or more is copied into the ring behind its .bin header
    and written from there with O_DIRECT: the same .bin, record and content hash
    as a small one, the stats of the bytes, never the bytes the host writes into
    its buffer after SaveTensor returns (probe_host poisons it), and its whole
    blocks never in the page cache (a buffered write leaves them there)."""
    import xxhash

    probe = dump.base / "probe.bin"  # a file system that keeps every page cached says so
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    buf = __import__("mmap").mmap(-1, 1 << 20)
    os.write(fd, buf)
    os.close(fd)
    if any(_cached_pages(probe)):
        pytest.skip("this file system keeps O_DIRECT writes in the page cache")
    dump.publish(AWAKE)
    sizes = (1 << 20, (3 << 20) + 5, (1 << 20) + 4096 - 60, 4096)
    dump.host(1, [["save", 2, 2, str(n), f"fill:{i + 1}:{n}", f"{L}/before/intensor{i}.bin"]
                  for i, n in enumerate(sizes)])
    recs = {r["path"]: r for r in dump.tensors()}
    for i, n in enumerate(sizes):
        path = f"{L}/before/intensor{i}.bin"
        if n >= 1 << 20:
            cached = _cached_pages(dump.data / path)
            assert not any(cached[:-1]), f"{path}: {sum(cached)} of {len(cached)} pages cached"
        attrs, payload = read_bin(dump.data / path)
        assert payload == bytes([i + 1]) * n and attrs["dims"] == str(n)
        rec = recs[path]
        assert rec["file"] == "bin" and rec["size"] == n
        assert rec["hash"] == f"{xxhash.xxh64_intdigest(payload):016x}"
        assert rec["stats"]["count"] == n and rec["stats"]["max"] == i + 1
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert ex["drained"] and ex["tensors_written"] == 4 and ex["bytes_written"] == sum(sizes)


def test_a_hook_never_waits_for_a_file(dump):
    """The host's part of a large tensor is one copy into the ring: with both
    writers held still (a stopped disk), SaveTensor of a 3 MiB tensor returns
    and the host goes on to its next save, the tensor queued and no file of it
    yet; let go, the writers write it, byte for byte."""
    dump.publish(AWAKE)
    host, _, held = _held_host(dump)
    big = (3 << 20) + 5
    from msprobe_atb.control.block import ControlBlock

    try:
        host.stdin.write(f"save\t2\t2\t{big}\tfill:7:{big}\t{L}/before/intensor1.bin\n"
                         + _save_one(2))
        host.stdin.flush()
        with ControlBlock(dump.root) as block:
            def both_queued():
                (slot,) = block.procs()
                return slot if slot.tensors_selected == 3 and slot.queue_depth == 2 else None
            slot = wait_until(both_queued, what="both saves returned, their tensors queued")
            assert slot.queue_bytes > big and slot.tensors_written == 1
        assert not (dump.data / L / "before" / "intensor1.bin").exists()
    finally:
        held.release()
    host.stdin.close()
    assert host.wait(timeout=60) == 0
    attrs, payload = read_bin(dump.data / L / "before" / "intensor1.bin")
    assert payload == b"\x07" * big and attrs["dims"] == str(big)
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert (ex["lost"], ex["tensors_written"]) == (0, 3)


def test_a_large_tensor_on_a_full_disk_is_lost_and_leaves_no_partial_file(dump, tmpfs):
    """The O_DIRECT write of a large tensor fails as a buffered one would:
    counted and recorded as lost with why, the half-written file taken back."""
    (dump.data / L).mkdir(parents=True)
    tmpfs(1024, f"out/atb_dump_data/data/{L}/before")
    dump.publish(AWAKE)
    big = 2 << 20
    dump.host(1, [["save", 2, 2, str(big), f"fill:1:{big}", f"{L}/before/intensor0.bin"],
                  ["save", 2, 2, "100", "fill:2:100", f"{L}/before/intensor1.bin"]])
    files = {r["path"].rsplit("/", 1)[1]: r for r in dump.tensors()}
    assert files["intensor0.bin"]["file"] == "lost"
    assert "cannot write the .bin: No space left on device" in files["intensor0.bin"]["note"]
    assert files["intensor1.bin"]["file"] == "bin"
    assert os.listdir(dump.data / L / "before") == ["intensor1.bin"]
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert (ex["errors"], ex["tensors_written"]) == (1, 1)


@pytest.mark.parametrize("task,want_file", [
    ("tensor", "bin"), ("statistics", "none"), ("all", "bin")])
def test_task_decides_bin_and_every_task_has_stats(dump, task, want_file):
    dump.publish({**AWAKE, "task": task})
    path = f"{L}/after/outtensor0.bin"
    dump.host(1, [["save", 2, 3, "3", "hex:" + struct.pack("<3i", -7, 0, 9).hex(), path]])
    [rec] = dump.tensors()
    assert rec["file"] == want_file and rec["task"] == task
    assert (dump.data / path).exists() == (want_file == "bin")
    st = rec["stats"]
    assert {k: record_float(v) if k in ("mean", "norm") else v for k, v in st.items()} == {
        "count": 3, "max": 9, "min": -7, "mean": 2 / 3, "norm": 130 ** 0.5, "nan": 0,
        "pinf": 0, "ninf": 0, "zero": 1}


def test_empty_and_unsupported_tensors(dump):
    dump.publish(AWAKE)
    dump.host(1, [["save", 2, 1, "0,4", "hex:", f"{L}/before/intensor0.bin"],
                  ["save", 2, 29, "4", "hex:1234", f"{L}/before/intensor1.bin"]])
    recs = {r["path"].rsplit("/", 1)[1]: r for r in dump.tensors()}
    assert recs["intensor0.bin"]["file"] == "bin" and recs["intensor0.bin"]["stats"] is None
    assert recs["intensor0.bin"]["note"] == "empty tensor"
    attrs, payload = read_bin(dump.data / L / "before/intensor0.bin")
    assert attrs["$Object.Length"] == "0" and payload == b""
    assert recs["intensor1.bin"]["note"] == "unsupported dtype int4"


# Bad paths in a default stage (before/intensor*), so that they are selected.
IN0 = "before/intensor0.bin"
BAD = [
    (["save", 2, 1, "2", "null:4", f"{L}/before/intensor0.bin"], "null data pointer"),
    (["save", 2, 1, "3", "hex:0000", f"{L}/before/intensor1.bin"], "does not match dims"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0/../../../{IN0}"], "'..'"),
    (["save", 2, 1, "1", "hex:0000", f"/tmp/{IN0}"], "absolute"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0/a\x01b/{IN0}"], "control character"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0//{IN0}"], "empty path component"),
    (["save", 2, 1, "1", "hex:0000", "0_7/0/" + "n" * 300 + f"/{IN0}"], "longer than 255"),
    (["save", "ND", 1, "1", "hex:0000", f"{L}/before/intensor2.bin"], "decimal enum"),
    (["save", 2, 1, "1,x", "hex:0000", f"{L}/before/intensor3.bin"], "comma list"),
    # numel * bits past 2^64 must not wrap into a matching size
    (["save", 2, 0, "536870912,1073741824", "hex:", f"{L}/before/intensor4.bin"], "exceed 2^64"),
    (["save", 2, 0, "10,107367629,536903681", "fill:1:8", f"{L}/before/intensor5.bin"],
     "exceed 2^64"),
    # a dtype past the int range must not wrap into another dtype (0 = float)
    (["save", 2, "4294967296", "1", "hex:0000803f", f"{L}/before/intensor6.bin"], "int range"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0/statistic.csv/{IN0}"], "reserved for a derived file"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0/ROUND_COMPLETE.json/{IN0}"], "reserved"),
    (["save", 2, 1, "1", "hex:0000", "0_7/0/statistic_extra.csv/after/outtensor0.bin"], "reserved"),
    (["save", 2, 1, "1", "hex:0000", f"0_7/0/.statistic.csv.1.tmp/{IN0}"], "starting with '.'"),
]


def test_bad_inputs_are_survived_counted_and_recorded(dump, abi):
    dump.publish(AWAKE)
    good = ["save", 2, 1, "1", "hex:003c", f"{L}/before/intensor9.bin"]
    p = dump.host(abi, [b[0] for b in BAD] + [good])
    lost = dump.tensors("lost")
    assert len(lost) == len(BAD)
    for (_, why), rec in zip(BAD, sorted(lost, key=lambda r: r["seq"])):
        assert why in rec["note"]
    assert [r["path"] for r in dump.tensors("bin")] == [good[-1]]
    assert p.stderr.count("not written") == len(BAD)
    # nothing escaped the dump root
    assert sorted(os.listdir(dump.out)) == ["atb_dump_data"]
    assert not (dump.base / "before").exists()
    exit_rec = [r for r in dump.records() if r["k"] == "exit"][0]
    assert exit_rec["errors"] == len(BAD) and exit_rec["tensors_written"] == 1
    # every selected tensor is accounted for, so status can say "all written"
    assert exit_rec["tensors_selected"] == exit_rec["tensors_written"] + exit_rec["errors"]


def test_a_lost_param_is_recorded_but_not_counted_as_a_tensor(dump, abi):
    dump.publish(AWAKE)
    dump.host(abi, [["param", "0_7/0/../../escape/op_param.json", '{"a":1}'],
                    ["save", 2, 1, "1", "hex:003c", f"{L}/before/intensor0.bin"]])
    [param] = [r for r in dump.records() if r["k"] == "param"]
    assert param["file"] == "lost" and "'..'" in param["note"]
    exit_rec = [r for r in dump.records() if r["k"] == "exit"][0]
    assert (exit_rec["tensors_selected"], exit_rec["tensors_written"], exit_rec["errors"]) == \
        (1, 1, 0)


def test_symlinked_dir_in_tree_is_not_followed(dump, tmp_path):
    dump.publish(AWAKE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (dump.data / "0_7" / "0").mkdir(parents=True)
    os.symlink(outside, dump.data / "0_7" / "0" / "2_Layer")
    dump.host(1, [["save", 2, 1, "1", "hex:003c", f"{L}/before/intensor0.bin"]])
    assert list(outside.iterdir()) == []
    [rec] = dump.tensors()
    assert rec["file"] == "lost" and "cannot create directory" in rec["note"]


def dedup_script(round_: int = 0) -> list:
    base = f"0_7/{round_}/2_Layer"
    same, other = f16(1, 2), f16(3, 4)
    return [
        ["save", 2, 1, "2", same, f"{base}/before/intensor0.bin"],
        ["save", 2, 1, "2", same, f"{base}/0_LinearOperation/before/intensor0_x.bin"],
        ["save", 2, 1, "2", other, f"{base}/0_LinearOperation/after/outtensor0_y.bin"],
        ["save", 2, 1, "2", same, f"{base}/0_LinearOperation/0_MatMulKernel/before/intensor0.bin"],
        ["save", 2, 1, "1,2", same, f"{base}/1_Add/before/intensor0.bin"],  # other dims
        ["save", 2, 1, "2", other, f"{base}/after/outtensor0.bin"],
    ]


def run_status(dump: Dump) -> str:
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "status", str(dump.out)],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


DEDUP_FILES = {"before/intensor0.bin": "bin",
               "0_LinearOperation/before/intensor0_x.bin": "linked",
               "0_LinearOperation/after/outtensor0_y.bin": "bin",
               "0_LinearOperation/0_MatMulKernel/before/intensor0.bin": "linked",
               "1_Add/before/intensor0.bin": "bin",
               "after/outtensor0.bin": "linked"}


def dedup_files(dump: Dump, rnd: int) -> tuple[str, dict[str, dict]]:
    base = f"0_7/{rnd}/2_Layer"
    return base, {r["path"][len(base) + 1:]: r for r in dump.tensors()
                  if r["path"].startswith(base + "/")}


def test_filter_level_1_links_identical_tensors_per_layer_and_round(dump):
    """Identical bytes are stored once, and every path still reads the whole
    tensor with any reader: the duplicates are hard links to the first copy."""
    dump.publish({**AWAKE, "save_child": True, "filter_level": 1})
    dump.host(1, dedup_script(0) + dedup_script(1))
    for rnd in (0, 1):
        base, recs = dedup_files(dump, rnd)
        assert {k: r["file"] for k, r in recs.items()} == DEDUP_FILES
        first = dump.data / base / "before/intensor0.bin"
        link = dump.data / base / "0_LinearOperation/before/intensor0_x.bin"
        assert link.read_bytes() == first.read_bytes()
        assert os.path.samefile(link, first) and first.stat().st_nlink == 3
        attrs, payload = read_bin(link)
        assert "data" not in attrs and attrs["$Object.Count"] == "1" and len(payload) == 4
        rec = recs["0_LinearOperation/before/intensor0_x.bin"]
        assert rec["alias"] == "../../before/intensor0.bin" and rec["stats"]["count"] == 2
        assert os.path.samefile(dump.data / base / "after/outtensor0.bin",
                                dump.data / base / "0_LinearOperation/after/outtensor0_y.bin")
    # the two rounds never share storage
    assert not os.path.samefile(dump.data / "0_7/0/2_Layer/before/intensor0.bin",
                                dump.data / "0_7/1/2_Layer/before/intensor0.bin")
    exit_rec = [r for r in dump.records() if r["k"] == "exit"][0]
    assert exit_rec["tensors_written"] == 12 and exit_rec["bytes_written"] == 6 * 4
    out = run_status(dump)
    assert "6 of the written tensors share storage" in out and "refused" not in out


def test_filter_level_1_stubs_where_the_file_system_refuses_links(dump, tmpfs):
    """An op directory on another file system cannot hold a link to its layer's
    files: that tensor is a data= stub naming the first copy, and says why."""
    (dump.data / "0_7" / "0" / "2_Layer").mkdir(parents=True)
    tmpfs(1024, "out/atb_dump_data/data/0_7/0/2_Layer/0_LinearOperation")
    dump.publish({**AWAKE, "save_child": True, "filter_level": 1})
    p = dump.host(1, dedup_script(0))
    base, recs = dedup_files(dump, 0)
    files = {k: r["file"] for k, r in recs.items()}
    # every duplicate has one side on each file system
    assert files == {k: "stub" if v == "linked" else v for k, v in DEDUP_FILES.items()}
    stub = recs["0_LinearOperation/before/intensor0_x.bin"]
    assert stub["note"].startswith("hard link refused (Invalid cross-device link)")
    attrs, payload = read_bin(dump.data / base / "0_LinearOperation/before/intensor0_x.bin")
    assert attrs["data"] == stub["alias"] == "../../before/intensor0.bin" and payload == b""
    assert p.stderr.count("refuses hard links") == 1
    assert "WARNING: 3 duplicates are data= stubs" in run_status(dump)


def test_default_stages_are_inputs_before_and_outputs_after(dump):
    """msProbe's tree (docs/msprobe_format.md §5.3): before/ holds an op's inputs, after/
    its outputs. The other two stages ATB offers are skipped before anything is copied or
    counted, unless save_all_stages is on."""
    stages = ["before/intensor0.bin", "before/outtensor0.bin", "after/intensor0.bin",
              "after/outtensor0.bin"]
    script = [["save", 2, 1, "1", "hex:003c", f"{L}/{s}"] for s in stages]
    dump.publish(AWAKE)
    dump.host(1, script)
    assert sorted(r["path"][len(L) + 1:] for r in dump.tensors()) == \
        ["after/outtensor0.bin", "before/intensor0.bin"]
    exit_rec = [r for r in dump.records() if r["k"] == "exit"][0]
    assert exit_rec["tensors_selected"] == 2
    shutil.rmtree(dump.root / ".probe" / "records")
    dump.publish({**AWAKE, "save_all_stages": True})
    dump.host(1, script)
    assert sorted(r["path"][len(L) + 1:] for r in dump.tensors()) == sorted(stages)


def test_filter_level_2_stubs_kernels_and_level_0_saves_all(dump):
    dump.publish({**AWAKE, "save_child": True, "filter_level": 2})
    dump.host(1, dedup_script(0))
    k = "0_7/0/2_Layer/0_LinearOperation/0_MatMulKernel/before/intensor0.bin"
    assert read_bin(dump.data / k)[0]["data"] == "intensor0.bin"
    dump.publish({**AWAKE, "save_child": True, "filter_level": 0})
    dump.host(1, dedup_script(5))
    assert {r["file"] for r in dump.tensors() if r["path"].startswith("0_7/5/")} == {"bin"}
    # without save_child there is no dedup at all (msProbe's precondition)
    dump.publish({**AWAKE, "save_child": False, "filter_level": 1})
    dump.host(1, dedup_script(6))
    assert {r["file"] for r in dump.tensors() if r["path"].startswith("0_7/6/")} == {"bin"}


def test_param_graph_topo_records(dump, abi):
    dump.publish({**AWAKE, "device": "0"})
    graph = '{"opName":"Layer_2","nodes":[{"opName":"E"}],"x":"\x01"}'
    p = dump.host(abi, [["param", f"{L}/op_param.json", '{"a":1}'],
                        ["param", "3_7/0/2_Layer/op_param.json", '{"b":2}'],
                        ["graph", "Layer_2", graph], ["topo?", "M"], ["topo?", "M"],
                        ["topo?", "N"], ["topo", "M", '{"modelName":"M"}']])
    assert say(p)["topo?"] == [1, 0, 1]
    assert (dump.data / L / "op_param.json").read_text() == '{"a":1}\n'
    assert not (dump.data / "3_7").exists()  # device filter
    recs = dump.records()
    [param] = [r for r in recs if r["k"] == "param"]
    assert param["file"] == "json" and param["path"] == f"{L}/op_param.json"
    [g] = [r for r in recs if r["k"] == "graph"]
    assert g["name"] == "Layer_2" and g["json"] == graph and g["dev"] == -1
    [t] = [r for r in recs if r["k"] == "topo"]
    assert t["model"] == "M" and json.loads(t["json"]) == {"modelName": "M"}


def test_graph_json_with_invalid_utf8_stays_valid_json(dump):
    dump.publish(AWAKE)
    script = b"graph\tLayer_\xff\t{\"a\":\"\xc3(\xed\xa0\x80\"}\n"
    subprocess.run([str(host_bin(1))], input=script, env=dump.env(), check=True,
                   capture_output=True)
    [g] = [r for r in dump.records() if r["k"] == "graph"]
    # invalid bytes come back as surrogate escapes, so the raw bytes are recoverable
    assert g["name"] == "Layer_\udcff" and "\udcc3(\udced\udca0\udc80" in g["json"]
    assert os.fsencode(g["name"]) == b"Layer_\xff"


def test_overflow_dumps_the_after_tensors_of_the_overflowing_kernel(dump, abi):
    raw = {"dump_enable": True, "task": "overflow_check", "exec_range": "0,0",
           "overflow_check": {"overflow_nums": 1}}
    dump.publish(raw)
    kdir = "0_7/3/5_Layer/3_LinearOperation/0_MatMulKernel"
    p = dump.host(abi, [
        "update", "ovcheck", ["range", 3], "before", "after", ["dir", "0_7/3/5_Layer"],
        ["overflow", "LinearOperation_5_3:MatMulKernel"],
        ["range", 3], "after", ["dir", "0_7/3/5_Layer/4_LinearOperation/0_MatMulKernel"],
        ["dir", kdir],
        ["save", 2, 1, "1", f16(float("inf")), f"{kdir}/after/outtensor0.bin"],
        "after", "ovcheck", ["overflow", "LinearOperation_5_3:MatMulKernel"], "after"])
    assert say(p) == {"ovcheck": [1, 0], "range": [1, 1], "before": [0],
                      "after": [0, 1, 0, 0], "dir": [0, 0, 1]}
    recs = dump.records()
    ov = [r for r in recs if r["k"] == "overflow"]
    assert [r["kernel"] for r in ov] == ["LinearOperation_5_3:MatMulKernel"]
    [t] = dump.tensors()
    assert t["file"] == "bin" and t["stats"]["pinf"] == 1
    assert [r for r in recs if r["k"] == "exit"][0]["overflow_events"] == 1


def test_config_changes_apply_at_the_next_op_and_errors_print_once(dump, abi):
    from msprobe_atb.control.block import ControlBlock

    dump.publish({"dump_enable": False})
    proc = subprocess.Popen([str(host_bin(abi))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dump.env())

    def ask(script: str, lines: int) -> list[str]:
        proc.stdin.write(script)
        proc.stdin.flush()
        return [proc.stdout.readline().strip() for _ in range(lines)]

    assert ask("update\nrange\t0\n", 1) == ["range=0"]
    dump.publish(AWAKE, error="line 3: dump_enable must be true or false")
    woke, answer = ask("update\nrange\t0\n", 2)
    assert woke.endswith("Ready to dump ATB data, the running speed of the model will be affected"
                         f" (pid {proc.pid})")
    assert answer == "range=1"
    # Each round of the monitor's duties shows the op count, then says a new error.
    # Counts 2, 3, 4 shown one after another: the round that showed 2 came after the
    # edit (it said the error, or one before it did), and the one that showed 3 began
    # only after it ended; so by the time 4 shows, a whole round has looked at the
    # error again after it was said, and would have said it twice.
    with ControlBlock(dump.root) as block:
        def shown(ops: int) -> None:
            wait_until(lambda: [s for s in block.procs() if s.pid == proc.pid][0].ops_seen == ops,
                       what=f"the monitor to show {ops} ops")

        shown(2)
        ask("update\n", 0)
        shown(3)
        ask("update\n", 0)
        shown(4)
    dump.publish({"dump_enable": False})  # back to sleep, cheaply
    proc.stdin.write("update\nrange\t0\nupdate\n")
    rest, err = proc.communicate(timeout=30)
    assert rest.splitlines() == [f"[msprobe-atb] Back asleep: dumping stopped (dump_enable is "
                                 f"false or the config is gone) (pid {proc.pid})", "range=0"]
    assert shim_messages(err.splitlines(), "config rejected") == [
        f"[msprobe-atb] config rejected (pid {proc.pid}), keeping the previous one: line 3: "
        "dump_enable must be true or false"]
    assert max(len(line) for line in err.splitlines() if "msprobe-atb" in line) <= 100
    assert [r["k"] for r in dump.records()].count("wake") == 1


def test_awake_selecting_nothing_answers_as_asleep_and_the_next_edit_takes_the_next_op(dump, abi):
    """exec_range "none" (msProbe's wake-up recipe) can select nothing: the hooks
    take the asleep exit (every predicate says no, not only the count), yet the
    process is awake: Ready is said once and a selecting edit takes the next op."""
    dump.publish({"dump_enable": True, "task": "all", "exec_range": "none"})
    proc = subprocess.Popen([str(host_bin(abi))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dump.env())

    def ask(script: list[str], lines: int) -> list[str]:
        proc.stdin.write("".join(line + "\n" for line in script))
        proc.stdin.flush()
        return [proc.stdout.readline().strip() for _ in range(lines)]

    idle = ["desc", "data", "range\t0", "before", "after", f"dir\t{L}", "isparam", "ovcheck"]
    woke, *answers = ask(["update", *idle], 1 + len(idle))
    assert woke.endswith(f"affected (pid {proc.pid})")
    assert answers == [f"{a.split(chr(9))[0]}=0" for a in idle]
    dump.publish(AWAKE)
    assert ask(["update", "range\t0", "before"], 2) == ["range=1", "before=1"]
    proc.stdin.write(f"save\t2\t1\t1\thex:003c\t{L}/before/intensor0.bin\n")
    rest, _ = proc.communicate(timeout=30)
    assert "Ready to dump" not in rest
    assert [t["path"] for t in dump.tensors("bin")] == [f"{L}/before/intensor0.bin"]


def test_forked_child_attaches_as_its_own_process(dump):
    dump.publish(AWAKE)
    dump.host(1, [["save", 2, 1, "1", "hex:003c", f"{L}/before/intensor0.bin"],
                  ["fork", "save", 2, 1, "1", "hex:0040", "0_8/0/2_Layer/before/intensor0.bin"]])
    logs = list((dump.root / ".probe" / "records").glob("*.jsonl"))
    assert len(logs) == 2
    attaches = [r for r in dump.records() if r["k"] == "attach"]
    assert len({a["pid"] for a in attaches}) == 2
    assert {r["path"] for r in dump.tensors("bin")} == {
        f"{L}/before/intensor0.bin", "0_8/0/2_Layer/before/intensor0.bin"}
    assert len([r for r in dump.records() if r["k"] == "exit"]) == 2


def publish_compiled(dump: Dump, **changes) -> None:
    from msprobe_atb.config.compile import compile_config
    from msprobe_atb.config.schema import validate
    from msprobe_atb.control.block import ControlBlock

    cfg = dataclasses.replace(compile_config(validate(AWAKE)), **changes)
    with ControlBlock(dump.root, create=True) as block:
        block.publish(cfg)


def test_drop_policy_counts_and_records_every_drop(dump):
    publish_compiled(dump, queue_budget_bytes=1000, queue_policy=1)
    n = 300
    dump.host(1, [["save", 2, 4, "65536", "fill:7:65536", f"{L}/before/intensor{i}.bin"]
                  for i in range(n)])
    lost = dump.tensors("lost")
    written = dump.tensors("bin")
    assert len(lost) + len(written) == n
    assert lost, "a 1000-byte budget with 64 KiB tensors must drop some"
    assert all("queue_full_policy drop" in r["note"] for r in lost)
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert ex["drops"] == len(lost) and ex["tensors_written"] == len(written)


def test_block_policy_is_lossless_with_a_tiny_budget(dump):
    publish_compiled(dump, queue_budget_bytes=1000, queue_policy=0)
    dump.host(1, [["stress", 2, 60, 8192]])
    assert len(dump.tensors("bin")) == 120 and not dump.tensors("lost")
    from msprobe_atb.control.block import PROC_EXITED, ControlBlock

    with ControlBlock(dump.root) as block:
        [slot] = [s for s in block.procs() if s.pid]
        assert slot.flags & PROC_EXITED
        assert (slot.queue_depth, slot.queue_bytes) == (0, 0)
        assert (slot.tensors_selected, slot.tensors_written) == (120, 120)
        assert slot.bytes_written == 120 * 8192 and slot.ops_seen == 120


def test_exit_drain_is_bounded_and_counts_what_is_left(dump):
    publish_compiled(dump)
    start = time.monotonic()
    n, size = 48, 512 << 10
    dump.host(1, [["save", 2, 4, str(size), f"fill:1:{size}", f"{L}/before/intensor{i}.bin"]
                  for i in range(n)], MSPROBE_ATB_EXIT_DRAIN_S="0")
    assert time.monotonic() - start < 30
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    lost = [r for r in dump.tensors("lost") if "exited" in r["note"]]
    assert ex["lost"] >= len(lost)
    assert len(dump.tensors("bin")) + ex["lost"] == n
    assert ex["drained"] == (ex["lost"] == 0)
    # no partial file is ever visible under a final name
    for r in dump.tensors("bin"):
        assert (dump.data / r["path"]).stat().st_size > size


def _save_one(i: int) -> str:
    """probe_host's save of a one-element fp16 tensor, the i-th of layer L."""
    return f"save\t2\t1\t1\t{f16(i % 1024)}\t{L}/before/intensor{i}.bin\n"


class _Lines(list):
    """A child's lines, gathered as they come; whole() once it closed the stream
    (its exit alone does not say the last lines were read)."""

    def __init__(self, stream):
        super().__init__()
        self._reader = threading.Thread(target=self.extend, args=(stream,), daemon=True)
        self._reader.start()

    def whole(self) -> _Lines:
        self._reader.join(timeout=60)
        return self


def _held_host(dump: Dump, only: str = "", **env: str
               ) -> tuple[subprocess.Popen, _Lines, HeldThreads]:
    """probe_host awake (its first tensor written) with its 2 writers held still
    (`only`: "0" or "1", that one alone); the shim's stderr lines gather in the
    list as they come."""
    host = subprocess.Popen([str(host_bin(1))], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env=dump.env(MSPROBE_ATB_WRITERS="2", **env))
    err = _Lines(host.stderr)
    host.stdin.write(_save_one(0))  # wakes the shim: its writers start
    host.stdin.flush()
    from msprobe_atb.control.block import ControlBlock

    with ControlBlock(dump.root, create=True) as block:
        wait_until(lambda: [s for s in block.procs() if s.n_writers == 2 and s.tensors_written],
                   what="the first tensor written")
    held = HeldThreads(host.pid, f"msp-writer{only}")
    assert len(held.tids) == (1 if only else 2)
    return host, err, held


@pytest.mark.parametrize("config,by_scope", [
    ({}, False), ({"save_child": True, "filter_level": 1}, True)])
def test_the_files_of_an_op_are_written_side_by_side_unless_deduplicated(dump, config,
                                                                          by_scope):
    """Without dedup each file goes to the writer of its own path, so one op's
    large tensors are written by both writers at once; with dedup every file of
    a layer goes to its scope's writer (the first copy is on disk before its
    links). Writer 1 held still (writer 0 may be faulting the ring in, under
    the queue's lock), writer 0 writes what is routed to it: once its head in
    the slot is idle, some of the op's files are on disk and some not, or
    (dedup) all or none, as writer 1's head says."""
    dump.publish({**AWAKE, "task": "tensor", **config})
    n, size = 12, 1 << 20
    paths = [f"{L}/after/outtensor{i}.bin" for i in range(n)]
    host, _, held = _held_host(dump, only="1")
    from msprobe_atb.control.block import HEAD_IDLE, ControlBlock

    try:
        # then a refused path, recorded lost by the host itself once every save before
        # it has returned, its tensor pushed
        host.stdin.write("".join(f"save\t2\t2\t{size}\tfill:{i + 1}:{size}\t{p}\n"
                                 for i, p in enumerate(paths))
                         + f"save\t2\t2\t1\tfill:1:1\t{L}/../after/outtensor0.bin\n")
        host.stdin.flush()
        with ControlBlock(dump.root) as block:
            slot = wait_until(lambda: next((s for s in block.procs() if s.errors == 1
                                            and s.writer_head[0] == HEAD_IDLE), None),
                              what="every save taken and writer 0 done with its files")
        on_disk = sum((dump.data / p).exists() for p in paths)
        assert slot.tensors_written == 1 + on_disk
        if by_scope:
            assert on_disk == (n if slot.writer_head[1] == HEAD_IDLE else 0)
        else:
            assert 0 < on_disk < n and slot.writer_head[1] != HEAD_IDLE
    finally:
        held.release()
    host.stdin.close()
    assert host.wait(timeout=60) == 0
    for i, p in enumerate(paths):
        assert read_bin(dump.data / p)[1] == bytes([i + 1]) * size


def test_exit_drain_finishes_statistics_items(dump):
    """queue_full_policy block: the statistics items still queued at the exit
    drain's deadline (MSPROBE_ATB_EXIT_DRAIN_S=0) write no file, so they are
    finished anyway, none lost; a finish that takes over a second says so, how
    many and how long. The writers are held while the host saves and exits, so
    the items are all still queued and the finish waits for them."""
    dump.publish({"dump_enable": True, "task": "statistics", "exec_range": "all"})
    n = 2000
    host, err, held = _held_host(dump, MSPROBE_ATB_EXIT_DRAIN_S="0")
    try:
        host.stdin.write("".join(_save_one(i) for i in range(1, n)))
        host.stdin.close()  # the host exits, its drain's deadline at once
        wait_until(lambda: any("statistics items were still queued" in line for line in err),
                   timeout=60, what="the exit drain saying it finishes the statistics items")
    finally:
        held.release()
    assert host.wait(timeout=60) == 0
    said = shim_messages(err.whole(), "process exit")
    assert any(f"{n - 1} statistics items were still queued after 0 s" in m for m in said), said
    assert any(re.search(rf"the {n - 1} statistics items took [0-9.]+ s more", m)
               for m in said), said
    assert not any("not written" in line for line in err)
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert (ex["lost"], ex["drained"], ex["tensors_written"]) == (0, True, n)
    tensors = dump.tensors()
    assert len(tensors) == n and all(r["file"] == "none" and r["stats"] for r in tensors)


def test_statistics_items_hold_no_more_memory_than_their_budget(dump):
    """An item costs what it takes in memory (its ring region: the item, its
    strings, the statistics, alignment), so with the writers held the host's
    one-element tensors fill queue_budget_mb and wait (policy block): the slot's
    queue_bytes never above the budget, each item charged several hundred bytes,
    not its 168 bytes of statistics alone. Then everything is written."""
    budget = 1 << 20
    dump.publish({"dump_enable": True, "task": "statistics", "exec_range": "all",
                  "queue_budget_mb": 1})
    n = 5000  # more than a MiB of them
    host, _, held = _held_host(dump)
    from msprobe_atb.control.block import ControlBlock

    def feed():  # the host stops reading while it waits for room
        host.stdin.write("".join(_save_one(i) for i in range(1, n)))
        host.stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        with ControlBlock(dump.root) as block:
            def full():
                (slot,) = block.procs()
                assert slot.queue_bytes <= budget
                return slot if slot.queue_bytes > budget - 1024 else None

            slot = wait_until(full, what="the queue filling its budget")
            for _ in range(50):  # the host waits for room: the queue stays within it
                full()
    finally:
        held.release()
    assert host.wait(timeout=60) == 0
    feeder.join()
    assert 1 < slot.queue_depth < n and 300 < slot.queue_bytes / slot.queue_depth < 1024
    ex = [r for r in dump.records() if r["k"] == "exit"][0]
    assert (ex["lost"], ex["tensors_written"]) == (0, n)


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def test_ring_memory_goes_back_after_a_burst_while_dumps_go_on(dump):
    """The memory a burst faulted into the copy ring goes back once the ring has
    not needed it for MSPROBE_ATB_RING_IDLE_S (2 s here), though the host goes on
    saving a tensor now and then (the ring stays mapped, and used, below what
    those need). The burst: one-element statistics tensors filling a 32 MiB
    budget while the writers are held."""
    budget = 32 << 20
    dump.publish({"dump_enable": True, "task": "statistics", "exec_range": "all",
                  "queue_budget_mb": budget >> 20})
    n = budget // 400  # more than the budget holds (448 B an item)
    host, _, held = _held_host(dump, MSPROBE_ATB_RING_IDLE_S="2")
    before = _rss_mib(host.pid)
    from msprobe_atb.control.block import ControlBlock

    def feed():  # the host stops reading while it waits for room
        host.stdin.write("".join(_save_one(i) for i in range(1, n)))
        host.stdin.flush()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    with ControlBlock(dump.root) as block:
        def slot():
            (s,) = block.procs()
            return s

        try:
            wait_until(lambda: slot().queue_bytes > budget - 1024, timeout=60,
                       what="the burst filling the copy queue")
            peak = _rss_mib(host.pid)
        finally:
            held.release()
        feeder.join(timeout=60)
        wait_until(lambda: slot().tensors_written == n, timeout=60, what="the burst written")

        def back():  # a tensor now and then, as a service goes on
            host.stdin.write(_save_one(0))
            host.stdin.flush()
            return _rss_mib(host.pid) <= before + 8
        wait_until(back, timeout=60, step=0.1, what="the host's RSS back near its size before")
    assert peak - before > 0.8 * (budget >> 20), (before, peak)
    host.stdin.close()
    assert host.wait(timeout=60) == 0


def test_closed_stderr_pipe_does_not_kill_the_host(dump):
    dump.publish(AWAKE)
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(host_bin(1))],
                           input="save\t2\t1\t1\tnull:2\tx/before/intensor0.bin\n"
                           "update\nrange\t0\n", stdout=subprocess.PIPE, stderr=w, text=True,
                           env=dump.env(), timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 0 and p.stdout.strip().endswith("range=1")
    assert dump.tensors("lost")


def test_a_failing_write_leaves_no_partial_file(dump):
    """A file size limit makes the .bin write fail half way (like a full disk):
    the tensor is recorded as lost with the reason and no file is left behind."""
    import resource

    dump.publish(AWAKE)
    limit = 16384

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    script = "".join(f"save\t2\t4\t{n}\tfill:3:{n}\t{L}/before/intensor{i}.bin\n"
                     for i, n in enumerate((100, 65536, 200)))
    p = subprocess.run([str(host_bin(1))], input=script, capture_output=True, text=True,
                       env=dump.env(), preexec_fn=small_files, timeout=60)
    assert p.returncode == 0, p.stderr
    files = {r["path"].rsplit("/", 1)[1]: r for r in dump.tensors()}
    assert files["intensor1.bin"]["file"] == "lost"
    assert "cannot write the .bin" in files["intensor1.bin"]["note"]
    assert files["intensor0.bin"]["file"] == files["intensor2.bin"]["file"] == "bin"
    assert sorted(os.listdir(dump.data / L / "before")) == ["intensor0.bin", "intensor2.bin"]


def kill_daemon_and_wait_restart(d: Dump, between) -> None:
    """SIGKILLs the dump's daemon and waits (calling between() in the loop) until
    the shim has started a new one."""
    import signal

    from msprobe_atb.control.block import ControlBlock
    from msprobe_atb.control.liveness import pid_alive

    with ControlBlock(d.root) as block:
        first = block.daemon_pid
        assert first and pid_alive(first)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            between()
            pid = block.daemon_pid
            if pid and pid != first and pid_alive(pid):
                return
            time.sleep(0.1)
    pytest.fail("the shim did not restart the control plane: " +
                (d.root / ".probe" / "daemon.log").read_text())


def test_a_killed_control_plane_is_restarted(tmp_path):
    import sys

    from testkit import REPO

    d = Dump(tmp_path, locked=False)
    d.config.write_text(json.dumps({"dump_enable": True, "exec_range": "all"}))
    proc = subprocess.Popen([str(host_bin(1))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=d.env(MSPROBE_ATB_ATTACH_WAIT_MS="30000"))
    try:
        proc.stdin.write("update\nrange\t0\n")
        proc.stdin.flush()
        # the daemon published
        assert proc.stdout.readline().strip().endswith(f"affected (pid {proc.pid})")
        assert proc.stdout.readline().strip() == "range=1"
        kill_daemon_and_wait_restart(d, lambda: None)
        proc.stdin.write(f"save\t2\t1\t1\thex:003c\t{L}/before/intensor0.bin\n")
    finally:
        proc.communicate(timeout=60)
        subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                        str(d.out)], cwd=REPO, capture_output=True, timeout=60)
        d.close()
    assert d.tensors("bin")


def test_an_asleep_process_has_no_thread_and_its_hooks_print_config_errors(dump):
    """Asleep, the shim starts no thread (a second thread costs a single-threaded
    host glibc malloc's fast path): the monitor's duties run from the hooks."""
    dump.publish({"dump_enable": False}, error="line 2: ids must be a string")
    p = dump.host(1, ["update", "threads", ["bench", 600], "threads"])
    assert say(p)["threads"] == [1, 1]
    [said] = shim_messages(p.stderr.splitlines(), "config rejected")
    assert said.endswith("), keeping the previous one: line 2: ids must be a string")
    [ex] = [r for r in dump.records() if r["k"] == "exit"]
    assert ex["ops_seen"] == 601


def test_an_asleep_process_restarts_a_killed_control_plane_from_its_hooks(tmp_path):
    d = Dump(tmp_path, locked=False)
    d.config.write_text(json.dumps({"dump_enable": False}))
    proc = subprocess.Popen([str(host_bin(1))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=d.env(MSPROBE_ATB_ATTACH_WAIT_MS="30000"))

    def threads_after(line: str) -> str:
        proc.stdin.write(line + "\nthreads\n")  # the threads reply is flushed
        proc.stdin.flush()
        while not (reply := proc.stdout.readline()).startswith("threads="):
            assert reply, "the host died"
        return reply.strip()

    try:
        assert threads_after("update") == "threads=1"  # attached, asleep, the daemon published
        # a service running ops while asleep
        kill_daemon_and_wait_restart(
            d, lambda: threads_after("bench\t1000") == "threads=1" or pytest.fail("a thread"))
    finally:
        proc.communicate(timeout=60)
        subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                        str(d.out)], capture_output=True, timeout=60)
        d.close()


@pytest.mark.parametrize("removed", ["root", "data"])
def test_removed_dump_tree_is_created_again_and_dumping_resumes(dump, abi, removed):
    """`rm -rf atb_dump_data` (or its data/) under a running process: the
    monitor thread attaches to a fresh tree (block, slot, record log, data/),
    or opens data/ again."""
    dump.config.write_text(json.dumps(AWAKE))  # what a daemon would publish, had it to start
    dump.publish(AWAKE)
    host = subprocess.Popen([str(host_bin(abi))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dump.env())

    def send(*lines: list) -> None:
        for line in lines:
            host.stdin.write("\t".join(map(str, line)) + "\n")
        host.stdin.write("threads\n")  # flushed reply: the lines before it ran
        host.stdin.flush()
        while not host.stdout.readline().startswith("threads="):
            pass

    records = dump.root / ".probe" / "records"
    try:
        first, second = f"{L}/before/intensor0.bin", f"{L}/before/intensor1.bin"
        send(["update"], ["need", "Layer"], ["save", 2, 1, 1, f16(1), first])
        wait_until(lambda: (dump.data / first).exists(), what="the first tensor")
        if removed == "root":
            dump.close()
            shutil.rmtree(dump.root)
            dump.lock()  # so no daemon starts (if one won the race, it publishes AWAKE too)
            dump.publish(AWAKE)
            # the attach record is written once the new block and fds are in place
            wait_until(lambda: any('"attach"' in f.read_text() for f in records.glob("*.jsonl")),
                       what="the attach record in a fresh record log")
        else:
            shutil.rmtree(dump.data)
            wait_until(dump.data.exists, what="data/ created again")
        send(["update"], ["need", "Layer"], ["save", 2, 1, 1, f16(2), second])
        host.stdin.close()
        assert host.wait(timeout=60) == 0
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    assert "was removed; dumping into a fresh one" in host.stderr.read()
    assert not (dump.data / first).exists()
    assert read_bin(dump.data / second)[1] == bytes.fromhex(f16(2)[4:])
    recs = dump.records()
    assert len(list(records.glob("*.jsonl"))) == 1
    assert [r["k"] for r in recs if r["k"] in ("attach", "tensor")] == (
        ["attach", "tensor"] if removed == "root" else ["attach", "tensor", "tensor"])
    assert recs[-1]["k"] == "exit" and recs[-1]["drained"]
    # a fresh block's counters start over
    assert recs[-1]["tensors_written"] == (1 if removed == "root" else 2)
