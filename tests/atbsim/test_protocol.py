"""The stand-in runtime calls the probe hooks exactly as real ATB does
(docs/atb_hooks.md §2-§9).

`RefProtocol` below re-derives, from that page's description alone, the
hook calls one Setup/Execute of protocol_host's graph must make; the tests
compare it with what the recording probe saw."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

# ---- the graph protocol_host builds (native/atbsim/testing/protocol_host.cpp) ----


@dataclass
class Kernel:
    name: str
    mki: str
    n_in: int
    n_out: int
    tiling: int = 0
    param: str = ""


@dataclass
class Leaf:
    name: str
    runner: str
    n_in: int
    n_out: int
    kernels: list[Kernel] = field(default_factory=list)
    param: str = ""
    ir_in: list[str] = field(default_factory=list)
    ir_out: list[str] = field(default_factory=list)


@dataclass
class Graph:
    name: str
    n_in: int
    n_out: int
    n_internal: int
    nodes: list[tuple[Leaf | Graph, list[int], list[int]]]

    @property
    def runner(self) -> str:
        return self.name + "Runner"

    param = ""


LINEAR = Leaf(
    "LinearOperation", "LinearOpsRunner", 2, 1,
    [Kernel("MatMulKernel", "MatMulOperation", 2, 1, 16, "transposeA:0,transposeB:1"),
     Kernel("MulsKernel", "ElewiseOperation", 1, 1, 8)],
    '{"hasBias":false,"transposeB":true}', ["x", "weight"], ["output"],
)
ELEWISE = Leaf("ElewiseOperation", "ElewiseOpsRunner", 2, 1,
               [Kernel("AddKernel", "ElewiseOperation", 2, 1)], '{"elewiseType":8}')
ACTIVATION = Leaf("ActivationOperation", "ActivationOpsRunner", 2, 1,
                  [Kernel("SwishKernel", "ActivationOperation", 2, 1)])
RESIDUAL = Graph("Residual", 3, 1, 1, [(ELEWISE, [0, 1], [4]), (ACTIVATION, [4, 2], [3])])
EVENT = Leaf("EventOperation", "EventRunner", 0, 0, [], '{"eventType":1}')
LAYER = Graph("Layer", 4, 1, 1, [(LINEAR, [0, 1], [5]), (RESIDUAL, [5, 2, 3], [4]),
                                 (EVENT, [], [])])

ANSWER_SETS = {
    "all-true": lambda fn: True,
    "desc-false": lambda fn: fn != "IsSaveTensorDesc",
    "defaults": lambda fn: fn == "IsSaveTensorInSpecificDir",
}


def op_name(name: str, ids) -> str:
    return name + "".join(f"_{i}" for i in ids)


def total_tiling(op) -> int:
    if isinstance(op, Graph):
        return sum(total_tiling(c) for c, _, _ in op.nodes)
    return sum(k.tiling for k in op.kernels)


class RefProtocol:
    """The expected hook calls, as described in docs/atb_hooks.md §4, §5, §9.
    Records (fn, args) with the args the comparison looks at."""

    def __init__(self, answers, root: str):
        self.ans = answers
        self.root = root  # "<dev>_<pid>"
        self.calls: list[tuple[str, dict]] = []
        self.runner_count: dict[tuple, int] = defaultdict(int)
        self.op_count: dict[tuple, int] = defaultdict(int)
        self.flags: dict[tuple, bool] = {}
        self.kflags: dict[tuple, bool] = {}
        self.dirs: dict[tuple, str] = {}
        self.created: set[tuple] = set()

    def ask(self, fn: str, **args) -> bool:
        self.calls.append((fn, args))
        return self.ans(fn)

    def note(self, fn: str, **args) -> None:
        self.calls.append((fn, args))

    def dir_of(self, op, ids) -> str:
        # runners start with their own name (atb_hooks.md §3.1)
        return self.dirs.get(ids, op.runner)

    # -- setup (atb_hooks.md §4) --
    def setup(self, op: Graph, gid: int) -> None:
        ids = (gid,)
        if ids not in self.created:
            self.created.add(ids)
            self._create(op, ids)
            if self.ask("ReportOperationGraphEnable"):
                self.note("ReportOperationGraph", opName=op_name(op.name, ids))
        self.flags[ids] = self.ask("IsTensorNeedSave", ids=list(ids), opType=op.name)
        if self.ask("IsSaveTensorDesc"):
            self._set_dir(op, ids, f"{self.root}/{self.op_count[ids]}/{gid}_{op.name}")
        self._runner_setup(op, ids)
        if total_tiling(op):
            self._fill_tiling(op, ids)
        self.op_count[ids] += 1
        if self.ask("ReportOperationStatisticEnable"):
            self.note("ReportOperationSetupStatistic", count=self.op_count[ids],
                      opName=op_name(op.name, ids))

    def _create(self, op, ids) -> None:
        if isinstance(op, Graph):
            for i, (child, _, _) in enumerate(op.nodes):
                cids = ids + (i,)
                self._create(child, cids)  # grandchildren first (post-order)
                self.flags[cids] = self.ask("IsTensorNeedSave", ids=list(cids),
                                            opType=child.name)

    def _set_dir(self, op, ids, d: str) -> None:
        self.dirs[ids] = d
        if isinstance(op, Graph):
            for i, (child, _, _) in enumerate(op.nodes):
                self._set_dir(child, ids + (i,), f"{d}/{i}_{child.name}")

    def _runner_setup(self, op, ids) -> None:
        if isinstance(op, Graph):
            for i, (child, _, _) in enumerate(op.nodes):
                self._runner_setup(child, ids + (i,))
        else:
            for k in range(len(op.kernels)):
                if ids + (k,) not in self.kflags:
                    self.kflags[ids + (k,)] = self.ask("IsTensorNeedSave", ids=list(ids + (k,)),
                                                       opType=op.name)
        self.note("UpdateConfig")

    def _fill_tiling(self, op, ids) -> None:
        if isinstance(op, Graph):
            for i, (child, _, _) in enumerate(op.nodes):
                self._fill_tiling(child, ids + (i,))
            return
        for k, kern in enumerate(op.kernels):
            kdir = f"{self.dir_of(op, ids)}/{k}_{kern.name}"
            if kern.tiling and self.kflags[ids + (k,)] \
                    and self.ask("IsExecuteCountInRange", count=self.runner_count[ids]) \
                    and self.ask("IsSaveTiling") \
                    and self.ask("IsSaveTensorInSpecificDir", dir=kdir):
                self.note("SaveTiling", path=f"{kdir}/kernel_tilingdata.bin", size=kern.tiling)

    # -- execute (atb_hooks.md §5, §6) --
    def execute(self, op: Graph, gid: int) -> None:
        self._runner_exec(op, (gid,))

    def _save(self, d: str, n_in: int, n_out: int, ir_in=(), ir_out=()) -> None:
        self.ask("IsSaveTensorData")
        for kind, n, ir in (("intensor", n_in, ir_in), ("outtensor", n_out, ir_out)):
            for i in range(n):
                suffix = f"_{ir[i]}" if ir else ""
                self.note("SaveTensor", path=f"{d}/{kind}{i}{suffix}.bin")

    def _io_paths(self, d: str, n_in: int, n_out: int) -> dict:
        return {"in": [f"{d}/intensor{i}.bin" for i in range(n_in)],
                "out": [f"{d}/outtensor{i}.bin" for i in range(n_out)]}

    def _runner_exec(self, op, ids) -> None:
        d, n, graph = self.dir_of(op, ids), self.runner_count[ids], isinstance(op, Graph)
        ir_in, ir_out = ((), ()) if graph else (op.ir_in, op.ir_out)

        def is_save() -> bool:
            return (self.ask("IsExecuteCountInRange", count=n) and self.flags[ids]
                    and self.ask("IsSaveTensorInSpecificDir", dir=d))

        if is_save() and self.ask("IsSaveTensorBefore"):
            self._save(f"{d}/before", op.n_in, op.n_out, ir_in, ir_out)
        if graph:
            for i, (child, _, _) in enumerate(op.nodes):
                self._runner_exec(child, ids + (i,))
        else:
            self._kernels(op, ids, d, n)
        if is_save() and self.ask("IsSaveTensorAfter"):
            self._save(f"{d}/after", op.n_in, op.n_out, ir_in, ir_out)
        if is_save() and self.ask("IsSaveParam") and op.param:
            self.note("SaveParam", path=f"{d}/op_param.json", param=op.param)
        if self.ask("ReportOperationIOTensorEnable") and not graph:
            io = f"{d}/{'before' if self.ask('IsSaveTensorBefore') else 'after'}"
            self.note("ReportOperationIOTensor", count=n, opName=op_name(op.name, ids),
                      opParam=op.param or "{}", **self._io_paths(io, op.n_in, op.n_out))
        self.runner_count[ids] += 1

    def _kernels(self, op: Leaf, ids, d: str, n: int) -> None:
        for k, kern in enumerate(op.kernels):
            kdir, flag = f"{d}/{k}_{kern.name}", self.kflags[ids + (k,)]
            # kernel level: count, before/after, then SpecificDir (quirk 3)
            if flag and self.ask("IsExecuteCountInRange", count=n) \
                    and self.ask("IsSaveTensorBefore") \
                    and self.ask("IsSaveTensorInSpecificDir", dir=kdir):
                self._save(f"{kdir}/before", kern.n_in, kern.n_out)
            self.ask("IsOverflowCheck")  # no Inf/NaN in these runs
            if self.ask("ReportKernelIOTensorEnable"):
                io = f"{d}/{'before' if self.ask('IsSaveTensorBefore') else 'after'}"
                self.note("ReportKernelIOTensor", count=n, opName=kern.mki, opParam=kern.param,
                          **self._io_paths(io, kern.n_in, kern.n_out))
            if flag and self.ask("IsExecuteCountInRange", count=n) \
                    and self.ask("IsSaveTensorAfter") \
                    and self.ask("IsSaveTensorInSpecificDir", dir=kdir):
                self._save(f"{kdir}/after", kern.n_in, kern.n_out)


# ---- comparing a recording with the expected calls ----

KEYS = {
    "IsTensorNeedSave": ("ids", "opType"),
    "IsExecuteCountInRange": ("count",),
    "IsSaveTensorInSpecificDir": ("dir",),
    "SaveTensor": ("path",),
    "SaveTiling": ("path", "size"),
    "SaveParam": ("path", "param"),
    "ReportOperationSetupStatistic": ("count", "opName"),
    "ReportOperationGraph": ("opName",),
    "ReportOverflowKernel": ("kernel",),
    "IsReportModelTopoInfo": ("model",),
    "ReportModelTopoInfo": ("model",),
}


def observed(call: dict) -> tuple[str, dict]:
    fn, args = call["fn"], call["args"]
    if fn in ("ReportOperationIOTensor", "ReportKernelIOTensor"):
        picked = {k: args[k] for k in ("count", "opName", "opParam")}
        picked["in"] = [t["filePath"] for t in args["in"]]
        picked["out"] = [t["filePath"] for t in args["out"]]
        return fn, picked
    return fn, {k: args[k] for k in KEYS.get(fn, ())}


def hook_calls(run) -> list[tuple[str, dict]]:
    return [observed(c) for c in run.calls if c["seq"] >= 0]


def assert_same_calls(got: list, want: list) -> None:
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"call #{i} differs: got {g}, want {w}\n(previous: {got[max(0, i - 3):i]})"
    assert len(got) == len(want), f"{len(got)} calls, want {len(want)}; tail {got[len(want):][:5]}"


def layer_reference(answers: str, root: str, rounds: int) -> list:
    ref = RefProtocol(ANSWER_SETS[answers], root)
    ref.ask("IsOverflowCheck")  # Context() (atb_hooks.md §8)
    for _ in range(rounds):
        ref.setup(LAYER, 0)
        ref.execute(LAYER, 0)
    ref.ask("IsOverflowCheck")  # ~Context()
    return ref.calls


# ---- tests ----


@pytest.mark.parametrize("answers", sorted(ANSWER_SETS))
def test_layer_call_sequence_matches_reference(abi, atbsim_paths, run_host, answers):
    """Two Setup/Execute rounds of the layer graph: the exact hook sequence,
    with ids, names, counters, directories and file names."""
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "2"],
                   preload=atbsim_paths.recording_probe(abi), answers=answers)
    assert run.returncode == 0, run.stderr
    assert_same_calls(hook_calls(run), layer_reference(answers, f"0_{run.pid}", 2))


def test_kernel_and_op_predicate_orders_differ(abi, atbsim_paths, run_host):
    """Op level asks count, SpecificDir, Before; kernel level count, Before,
    SpecificDir (quirk 3) -- checked directly on the recording."""
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi))
    fns = run.fns()
    kernel_dir_idx = next(i for i, c in enumerate(run.calls)
                          if c["fn"] == "IsSaveTensorInSpecificDir"
                          and c["args"]["dir"].endswith("/0_MatMulKernel")
                          and i > fns.index("IsSaveTensorBefore"))
    assert fns[kernel_dir_idx - 2: kernel_dir_idx + 1] == [
        "IsExecuteCountInRange", "IsSaveTensorBefore", "IsSaveTensorInSpecificDir"]
    op_dir_idx = next(i for i, c in enumerate(run.calls)
                      if c["fn"] == "IsSaveTensorInSpecificDir"
                      and c["args"]["dir"].endswith("/0_LinearOperation"))
    assert fns[op_dir_idx - 1: op_dir_idx + 2] == [
        "IsExecuteCountInRange", "IsSaveTensorInSpecificDir", "IsSaveTensorBefore"]


def test_ids_counters_and_paths(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "3"],
                   preload=atbsim_paths.recording_probe(abi))
    assert run.returncode == 0, run.stderr
    root = f"0_{run.pid}"
    stats = [(c["args"]["count"], c["args"]["opName"])
             for c in run.of("ReportOperationSetupStatistic")]
    assert stats == [(1, "Layer_0"), (2, "Layer_0"), (3, "Layer_0")]  # 1-based (quirk 1)
    assert all(c["args"]["st"].startswith("totalTime:0, runnerCreateTime:0")
               and c["args"]["st"].endswith("kernelCacheGetRunInfoTime:0")
               for c in run.of("ReportOperationSetupStatistic"))
    paths = [c["args"]["path"] for c in run.of("SaveTensor")]
    for rnd in range(3):
        assert f"{root}/{rnd}/0_Layer/before/intensor0.bin" in paths
        assert (f"{root}/{rnd}/0_Layer/1_Residual/1_ActivationOperation/0_SwishKernel"
                f"/after/outtensor0.bin") in paths
    # IR names at op level only; kernel files never carry them
    assert f"{root}/0/0_Layer/0_LinearOperation/before/intensor0_x.bin" in paths
    assert f"{root}/0/0_Layer/0_LinearOperation/after/outtensor0_output.bin" in paths
    assert f"{root}/0/0_Layer/0_LinearOperation/0_MatMulKernel/before/intensor0.bin" in paths
    # "before" directories also get outtensors, "after" directories intensors (quirk 10)
    assert f"{root}/0/0_Layer/before/outtensor0.bin" in paths
    assert f"{root}/0/0_Layer/after/intensor3.bin" in paths
    io = run.of("ReportOperationIOTensor")
    assert [c["args"]["count"] for c in io if c["args"]["opName"] == "LinearOperation_0_0"] == [
        0, 1, 2]
    assert {c["args"]["opName"] for c in io} == {
        "LinearOperation_0_0", "ElewiseOperation_0_1_0", "ActivationOperation_0_1_1",
        "EventOperation_0_2"}  # never a graph runner


def test_tensor_descriptions(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi))
    by_path = {c["args"]["path"].split("/", 1)[1]: c["args"] for c in run.of("SaveTensor")}
    alpha = by_path["0/0_Layer/before/intensor3.bin"]
    assert (alpha["format"], alpha["dtype"], alpha["dims"], alpha["size"]) == ("2", "0", "", 4)
    weight = by_path["0/0_Layer/0_LinearOperation/before/intensor1_weight.bin"]
    assert (weight["dims"], weight["size"]) == ("4,4", 64)
    # kernels see views: MulsKernel sees the [2,4] output flattened
    muls = by_path["0/0_Layer/0_LinearOperation/1_MulsKernel/before/intensor0.bin"]
    assert muls["dims"] == "8"
    # ... of the runner's scratch tensor, which MatMulKernel wrote
    matmul = by_path["0/0_Layer/0_LinearOperation/0_MatMulKernel/after/outtensor0.bin"]
    assert (matmul["dims"], matmul["fnv1a64"]) == ("2,4", muls["fnv1a64"])
    kio = [c["args"] for c in run.of("ReportKernelIOTensor")
           if c["args"]["opName"] == "MatMulOperation"]
    linear_dir = f"0_{run.pid}/0/0_Layer/0_LinearOperation"  # the runner's dir (quirk 6)
    assert kio[0]["in"][0] == {"dtype": "float", "format": "nd", "shape": "2,4",
                               "filePath": f"{linear_dir}/before/intensor0.bin"}
    oio = [c["args"] for c in run.of("ReportOperationIOTensor")]
    assert {c["opName"]: c["opParam"] for c in oio}["ActivationOperation_0_1_1"] == "{}"


def test_desc_false_gives_bare_runner_paths(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "1"],
                   preload=atbsim_paths.recording_probe(abi), answers="desc-false")
    paths = {c["args"]["path"] for c in run.of("SaveTensor")}
    assert "LayerRunner/before/intensor0.bin" in paths
    assert "LinearOpsRunner/before/intensor0_x.bin" in paths
    assert "LinearOpsRunner/0_MatMulKernel/after/outtensor0.bin" in paths
    assert "ElewiseOpsRunner/0_AddKernel/before/intensor1.bin" in paths
    assert all("/" not in p.split("Runner/", 1)[0] for p in paths), paths


def test_is_tensor_need_save_caching(abi, atbsim_paths, run_host):
    """Children and kernels are asked once; the top-level op at every Setup."""
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "3"],
                   preload=atbsim_paths.recording_probe(abi))
    asked = [tuple(c["args"]["ids"]) for c in run.of("IsTensorNeedSave")]
    assert asked.count((0,)) == 3
    children = [(0, 0), (0, 1, 0), (0, 1, 1), (0, 1), (0, 2)]
    kernels = [(0, 0, 0), (0, 0, 1), (0, 1, 0, 0), (0, 1, 1, 0)]
    assert asked[:5] == children  # post-order at runner creation
    for ids in children + kernels:
        assert asked.count(ids) == 1, ids
    assert len(asked) == 3 + len(children) + len(kernels)


def test_operation_graph_json(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--rounds", "2"],
                   preload=atbsim_paths.recording_probe(abi))
    reports = run.of("ReportOperationGraph")
    assert len(reports) == 1  # once per top-level op object
    raw = reports[0]["args"]["graph"]
    graph = json.loads(raw)
    assert raw == json.dumps(graph, separators=(",", ":"), sort_keys=True)  # compact, sorted

    def leaf(name, ids, n_in, n_out, param, in_ids, out_ids):
        return {"inTensorIds": in_ids, "inTensorNum": n_in, "opName": op_name(name, ids),
                "opType": name, "outTensorIds": out_ids, "outTensorNum": n_out, "param": param}

    residual = {
        "inTensorIds": [5, 2, 3], "inTensorNum": 3, "internalTensorNum": 1,
        "opName": "Residual_0_1", "opType": "Residual", "outTensorIds": [4],
        "outTensorNum": 1, "param": "",
        "nodes": [leaf("ElewiseOperation", (0, 1, 0), 2, 1, {"elewiseType": 8}, [0, 1], [4]),
                  leaf("ActivationOperation", (0, 1, 1), 2, 1, None, [4, 2], [3])],
    }
    assert graph == {
        "inTensorNum": 4, "internalTensorNum": 1, "opName": "Layer_0", "opType": "Layer",
        "outTensorNum": 1, "param": "",
        "nodes": [leaf("LinearOperation", (0, 0), 2, 1,
                       {"hasBias": False, "transposeB": True}, [0, 1], [5]),
                  residual,
                  leaf("EventOperation", (0, 2), 0, 0, {"eventType": 1}, [], [])],
    }


def model_reference(answers: str, root: str, rounds: int) -> list[tuple[str, list]]:
    """Segments ("main" | "exec", calls) of --model in sync order: per round,
    setup and execute of each layer node, then the topo report (atb_hooks.md §9)."""
    ref, segments = RefProtocol(ANSWER_SETS[answers], root), []

    def segment(role: str, step) -> None:
        ref.calls = []
        step()
        segments.append((role, ref.calls))

    def topo() -> None:
        if ref.ask("IsReportModelTopoInfo", model="TinyModel_Prefill"):
            ref.note("ReportModelTopoInfo", model="TinyModel_Prefill")

    for _ in range(rounds):
        for gid in (0, 1):
            segment("main", lambda g=gid: ref.setup(LAYER, g))
            segment("exec", lambda g=gid: ref.execute(LAYER, g))
        segment("main", topo)
    return segments


def of_role(segments: list, role: str | None = None) -> list:
    return [c for r, calls in segments if role in (None, r) for c in calls]


def test_model_sync_sequence_and_topo(abi, atbsim_paths, run_host):
    run = run_host([atbsim_paths.protocol_host(abi), "--model", "--rounds", "2"],
                   preload=atbsim_paths.recording_probe(abi))
    assert run.returncode == 0, run.stderr
    assert len({c["tid"] for c in run.calls}) == 1
    calls = hook_calls(run)[1:-1]  # without the Context's IsOverflowCheck calls
    assert_same_calls(calls, of_role(model_reference("all-true", f"0_{run.pid}", 2)))
    assert len(run.of("ReportModelTopoInfo")) == 2  # once per Model::Execute
    raw = run.of("ReportModelTopoInfo")[0]["args"]["graph"]
    topo_json = json.loads(raw)
    assert raw == json.dumps(topo_json, separators=(",", ":"), sort_keys=True)
    m = "TinyModel_Prefill"
    assert topo_json == {
        "modelName": m,
        "inTensors": [f"{m}_input_0", f"{m}_input_1", f"{m}_input_2"],
        "outTensors": [f"{m}_output_0"],
        "internalTensors": [f"{m}_internal_0"],
        "weightTensors": [f"{m}_weight_0", f"{m}_weight_1"],
        "nodes": [
            {"opName": "Layer", "inTensors": [f"{m}_input_0", f"{m}_weight_0", f"{m}_input_1",
                                              f"{m}_input_2"], "outTensors": [f"{m}_internal_0"]},
            {"opName": "Layer", "inTensors": [f"{m}_internal_0", f"{m}_weight_1",
                                              f"{m}_input_1", f"{m}_input_2"],
             "outTensors": [f"{m}_output_0"]},
        ],
    }
    names = {c["args"]["opName"] for c in run.of("ReportOperationGraph")}
    assert names == {"Layer_0", "Layer_1"}  # every layer node is its own top-level op


def test_model_async_runs_execute_on_a_second_thread(abi, atbsim_paths, run_host):
    """ATB_OPERATION_EXECUTE_ASYNC: Execute runs on a worker thread while the
    main thread sets up the next node, so hooks are called concurrently."""
    run = run_host([atbsim_paths.protocol_host(abi), "--model", "--async", "--rounds", "2"],
                   preload=atbsim_paths.recording_probe(abi),
                   env={"RECPROBE_OVERLAP": "ReportOperationGraph#2"})
    assert run.returncode == 0, run.stderr
    # the main thread, in layer 1's first Setup (after layer 0's Execute was
    # queued), waits inside a hook until the worker calls one
    overlap = run.of("_overlap")
    assert len(overlap) == 1 and overlap[0]["ret"] is True, overlap
    main_tid = overlap[0]["tid"]
    hooks = [c for c in run.calls if c["seq"] >= 0]
    tids = {c["tid"] for c in hooks}
    assert len(tids) == 2 and main_tid in tids
    other = next(c for c in hooks if c["seq"] == overlap[0]["args"]["other_seq"])
    assert other["tid"] != main_tid
    main_calls = [observed(c) for c in hooks if c["tid"] == main_tid][1:-1]
    worker_calls = [observed(c) for c in hooks if c["tid"] != main_tid]
    segments = model_reference("all-true", f"0_{run.pid}", 2)
    assert_same_calls(main_calls, of_role(segments, "main"))
    # the worker thread has device 0 too (the "0_<pid>" path prefix)
    assert_same_calls(worker_calls, of_role(segments, "exec"))
