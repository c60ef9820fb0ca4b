"""`msprobe-atb replay`: each op of a real stand-in dump recomputed in float64
from its dumped inputs and judged against its dumped outputs; the references held
against independently written formulas."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from msprobe_form import MsprobeRound
from offline_helpers import make_real_dump, need_real, side_by_side

from msprobe_atb.cli import main
from msprobe_atb.offline.read.binfile import load_bin
from msprobe_atb.offline.read.table import open_dump
from msprobe_atb.offline.replay.judge import judge_output
from msprobe_atb.offline.replay.refs import REFERENCES, NotReplayable, Terms

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

LLAMA_TYPES = {"LinearOperation", "RmsNormOperation", "RopeOperation", "SplitOperation",
               "ReshapeAndCacheOperation", "SelfAttentionOperation", "PagedAttentionOperation",
               "ElewiseOperation", "ActivationOperation", "GatherOperation"}


def replay(*args: str) -> tuple[int, dict | str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["replay", *map(str, args)])
    text = out.getvalue()
    return rc, (json.loads(text) if "--json" in args else text)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory, real_dumps):
    need_real()
    base = tmp_path_factory.mktemp("replay")
    yield {**real_dumps, **side_by_side({
        "bf16": partial(make_real_dump, base / "bf16", "bf16"),
        "swiglu_inf": partial(make_real_dump, base / "swiglu", "fp16",
                              inject="inf:layer=1,op=SwiGLU,round=0"),
        "gateup_scaled": partial(make_real_dump, base / "scaled", "fp16",
                                 inject="scale=300:layer=1,op=GateUp,round=0")})}
    shutil.rmtree(base, ignore_errors=True)


def computed(op_type: str):
    """The reference of `op_type`, its outputs' values only (a sum's Terms unwrapped)."""
    def run(param: dict, inputs: list) -> list[np.ndarray]:
        return [o.value if isinstance(o, Terms) else o for o in REFERENCES[op_type](param, inputs)]
    return run


def by_path(doc: dict) -> dict[str, dict]:
    return {o["path"].split("/", 1)[1]: o for o in doc["ops"]}


@pytest.mark.parametrize("which", ["golden", "target", "bf16"])
def test_every_op_of_a_clean_dump_replays_ok(dumps, which):
    rc, doc = replay(dumps[which], "--all", "--json")
    assert rc == 0 and doc["first"] is None
    bad = [(o["path"], o["verdict"], o["why"]) for o in doc["ops"] if o["verdict"] != "ok"]
    assert not bad
    assert {o["op_type"] for o in doc["ops"]} == LLAMA_TYPES
    rounds = {o["round"] for o in doc["ops"]}
    assert {0, 1} <= rounds  # prefill round 0 and decode rounds
    assert any("Decoder_layer" in o["path"] for o in doc["ops"])
    for o in doc["ops"]:
        for out in o["outputs"]:
            assert out["verdict"] == "ok" and out["mismatched"] == 0


def test_injected_inf_is_the_ops_own_error_and_what_follows_is_input_bad(dumps):
    rc, doc = replay(dumps["swiglu_inf"], "--all", "--json")
    assert rc == 1
    first = doc["first"]
    assert first["path"].endswith("0/2_Prefill_layer/11_ActivationOperation")
    assert first["verdict"] == "own-error"
    worst = first["outputs"][0]["worst"]
    assert worst["dumped"] == "inf" and math.isfinite(worst["float64"])
    ops = by_path(doc)
    down = ops["0/2_Prefill_layer/12_LinearOperation"]
    assert down["verdict"] == "input-bad"
    assert down["bad_input"]["producer"].endswith("2_Prefill_layer/11_ActivationOperation")
    # Every op after it whose inputs hold Inf is input-bad; none is blamed.
    after = doc["ops"][doc["ops"].index(first) + 1:]
    assert [o for o in after if o["verdict"] in ("own-error", "overflow")] == []
    dumped = open_dump(dumps["swiglu_inf"]).tensors
    holding = {r["op_id"] for r in dumped.filter(
        (dumped["io"] == "input") & dumped["nonfinite"]).iter_rows(named=True)}
    for o in after:
        if o["op_id"] in holding:
            assert o["verdict"] == "input-bad", o


def test_scaled_output_overflows_at_the_next_op(dumps):
    rc, doc = replay(dumps["gateup_scaled"], "--op", "2_10", "--op", "2_11", "--json")
    assert rc == 1
    ops = by_path(doc)
    assert ops["0/2_Prefill_layer/10_LinearOperation"]["verdict"] == "own-error"
    swiglu = ops["0/2_Prefill_layer/11_ActivationOperation"]
    assert swiglu["verdict"] == "overflow"
    assert "float16" in swiglu["why"] and "65504" in swiglu["why"]
    assert abs(swiglu["outputs"][0]["worst"]["float64"]) > 65504
    assert doc["first"]["path"] == next(o["path"] for o in doc["ops"]
                                        if o["op_id"] == "2_10")


def test_text_output_names_the_first_op_and_golden(dumps):
    rc, text = replay(dumps["injected"], "--all", "--golden", dumps["target"])
    assert rc == 1
    assert "first op at fault:" in text and "1_Prefill_layer/5_SelfAttentionOperation" in text
    assert ("the target's 1_Prefill_layer/5_SelfAttentionOperation is own-error; golden's "
            "replays ok") in text


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def test_a_param_value_not_implemented_is_not_replayable_by_name(dumps, tmp_path):
    d = _copy(dumps["target"], tmp_path / "d")
    params = sorted(d.glob("atb_dump_data/data/*/0/1_Prefill_layer/3_RopeOperation/op_param.json"))
    params[0].write_text('{"cosFormat":1,"rotaryCoeff":2}\n')
    rc, doc = replay(d, "--op", "1_3", "--round", "0", "--json")
    assert rc == 0
    (op,) = doc["ops"]
    assert op["verdict"] == "not-replayable" and "cosFormat=1" in op["why"]


def test_a_graph_without_its_children_says_to_dump_with_save_child(tmp_path):
    need_real()
    d = make_real_dump(tmp_path / "top", "fp16", save_child=False)
    rc, doc = replay(d, "--op", "1", "--round", "0", "--json")
    (op,) = doc["ops"]
    assert op["verdict"] == "not-replayable" and '"save_child": true' in op["why"]


def test_statistics_only_dump_is_not_replayable(dumps, stats_dump):
    rc, doc = replay(stats_dump, "--op", "1_0", "--round", "0", "--json")
    (op,) = doc["ops"]
    assert op["verdict"] == "not-replayable" and "statistics" in op["why"]


def _msprobe_form(src: Path, dst: Path) -> Path:
    """The same dump as msProbe's shim leaves it: dedup stubs named by op id, 6-decimal
    statistic.csv in thread-pool order, no statistic_extra.csv, info/layer/{pid}."""
    data = dst / "atb_dump_data" / "data"
    df = open_dump(src).tensors
    writers: dict[tuple, MsprobeRound] = {}
    for r in df.iter_rows(named=True):
        key = (r["dev_pid"], r["round"])
        w = writers.setdefault(key, MsprobeRound(data, r["dev_pid"], r["round"]))
        op_dir = Path(r["path"]).parent.parent
        rel = op_dir.relative_to(r["round_dir"])
        w.add(str(rel), r["io"], int(str(r["index"]).split("_")[0]), load_bin(r["path"]))
        param = op_dir / "op_param.json"
        if param.is_file():
            shutil.copyfile(param, w.dir / rel / "op_param.json")
    for w in writers.values():
        w.close()
    for layer_dir in (src / "atb_dump_data" / "info" / "layer").iterdir():
        shutil.copytree(layer_dir, dst / "atb_dump_data" / "info" / "layer" /
                        layer_dir.name.split("_")[-1])
    return dst


def test_msprobe_made_dump_replays(dumps, tmp_path):
    d = _msprobe_form(dumps["injected"], tmp_path / "ms")
    stubs = [f for f in d.rglob("*.bin") if b"data=" in f.read_bytes()[:300]]
    assert stubs and not list(d.rglob("statistic_extra.csv"))
    rc, doc = replay(d, "--all", "--json")
    assert rc == 1 and doc["first"]["path"].endswith("1_Prefill_layer/5_SelfAttentionOperation")
    assert {o["op_type"] for o in doc["ops"]} == LLAMA_TYPES
    assert not [o for o in doc["ops"] if o["verdict"] == "not-replayable"]


def test_replay_needs_ops_named_or_all(dumps, capsys):
    rc, _ = replay(dumps["target"])
    assert rc == 2 and "--op ID|PATH" in capsys.readouterr().err
    rc, _ = replay(dumps["target"], "--op", "99_99")
    assert rc == 2 and "no op matches 99_99" in capsys.readouterr().err


def test_worker_processes_give_the_in_process_verdicts(dumps, monkeypatch, capsys):
    """`-j 2`: the same document, op for op and in order, as one process;
    here with own-error, input-bad and ok ops. -j 0 is refused by name."""
    from msprobe_atb.offline.replay import workers
    rc1, one = replay(dumps["swiglu_inf"], "--all", "--json", "-j", "1")
    monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 0)  # this dump is small
    pools = []

    class Pool(workers.ProcessPoolExecutor):
        def __init__(self, *a, **kw):
            pools.append(a[0])
            super().__init__(*a, **kw)
    monkeypatch.setattr(workers, "ProcessPoolExecutor", Pool)
    rc2, two = replay(dumps["swiglu_inf"], "--all", "--json", "-j", "2")
    assert pools == [2] and rc1 == rc2 == 1 and two == one
    assert {o["verdict"] for o in one["ops"]} >= {"ok", "own-error", "input-bad"}
    rc, _ = replay(dumps["swiglu_inf"], "--all", "-j", "0")
    assert rc == 2 and "-j 0: at least 1 worker" in capsys.readouterr().err


def test_a_worker_that_dies_is_said_not_a_traceback(dumps, tmp_path, monkeypatch, capsys):
    """Here its initializer cannot open the dump (gone once the command had read it)."""
    from msprobe_atb.offline.replay import workers
    gone = tmp_path / "gone"
    shutil.copytree(dumps["swiglu_inf"], gone)
    monkeypatch.setattr(workers, "PARALLEL_MIN_BYTES", 0)
    real_open = workers.ProcessPoolExecutor.__init__

    def remove_then_start(self, *a, **kw):
        shutil.rmtree(gone)
        real_open(self, *a, **kw)
    monkeypatch.setattr(workers.ProcessPoolExecutor, "__init__", remove_then_start)
    rc, _ = replay(gone, "--all", "-j", "2")
    err = capsys.readouterr().err
    assert rc == 2 and "error: a worker process ended while replaying" in err
    assert "-j 1 replays in this process" in err and "Traceback" not in err


_HEAP_KEPT = """
import ctypes, sys
import numpy as np
from msprobe_atb.offline.replay import workers

class MallInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena ordblks smblks hblks hblkhd usmblks "
                                               "fsmblks uordblks fordblks keepcost").split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo
workers._open(sys.argv[1], None)
mapped = libc.mallinfo2().hblkhd
a = np.ones(24 << 17)  # 24 MiB
print(libc.mallinfo2().hblkhd - mapped)
del a
print(libc.mallinfo2().fordblks >= 24 << 20)
"""


def test_a_worker_keeps_its_freed_arrays_for_the_next(dumps):
    """A 24 MiB temporary of a worker comes from its heap, not a mapping of its own,
    and its pages stay there when it is freed: mapped afresh, each page is faulted in
    again for every slice (glibc, whose mallinfo2 says where the bytes are)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _HEAP_KEPT, str(dumps["swiglu_inf"])],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0", "True"]


# ---- the references against formulas written independently ----------------------------


def _rope_rotate_half(x, cos, sin):
    """Hugging Face's rotate_half RoPE, per head."""
    d = cos.shape[-1]
    heads = x.reshape(x.shape[0], -1, d)
    x1, x2 = heads[..., : d // 2], heads[..., d // 2:]
    rot = np.concatenate([-x2, x1], axis=-1)
    return (heads * cos[:, None, :] + rot * sin[:, None, :]).reshape(x.shape)


def _rope_interleaved(x, cos, sin):
    """GPT-J's interleaved RoPE: pairs (2i, 2i+1) rotate together."""
    d = cos.shape[-1]
    heads = x.reshape(x.shape[0], -1, d).copy()
    out = np.empty_like(heads)
    out[..., 0::2] = heads[..., 0::2] * cos[:, None, 0::2] - heads[..., 1::2] * sin[:, None, 0::2]
    out[..., 1::2] = heads[..., 1::2] * cos[:, None, 1::2] + heads[..., 0::2] * sin[:, None, 1::2]
    return out.reshape(x.shape)


def test_rope_reference_matches_rotate_half_and_interleaved():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(5, 32)), rng.normal(size=(5, 16))
    ang = rng.uniform(0, 6, size=(5, 4))
    cos2 = np.cos(np.concatenate([ang, ang], axis=1))
    sin2 = np.sin(np.concatenate([ang, ang], axis=1))
    rq, rk = computed("RopeOperation")({"rotaryCoeff": 2}, [q, k, cos2, sin2, np.array([5])])
    np.testing.assert_allclose(rq, _rope_rotate_half(q, cos2, sin2), rtol=1e-12)
    np.testing.assert_allclose(rk, _rope_rotate_half(k, cos2, sin2), rtol=1e-12)
    cosi, sini = np.cos(np.repeat(ang, 2, axis=1)), np.sin(np.repeat(ang, 2, axis=1))
    (rq, _) = computed("RopeOperation")({"rotaryCoeff": 8}, [q, k, cosi, sini, np.array([5])])
    np.testing.assert_allclose(rq, _rope_interleaved(q, cosi, sini), rtol=1e-12)
    with pytest.raises(NotReplayable, match="rotaryCoeff=3"):
        computed("RopeOperation")({"rotaryCoeff": 3}, [q, k, cos2, sin2, np.array([5])])


def _attention_loops(q, k, v, scale, causal_from):
    s, h, d = q.shape
    out = np.zeros_like(q)
    for i in range(s):
        for hh in range(h):
            n = causal_from + i + 1
            w = np.array([q[i, hh] @ k[j, hh] * scale for j in range(n)])
            w = np.exp(w - w.max())
            out[i, hh] = (w / w.sum()) @ v[:n, hh]
    return out


def test_attention_references_match_a_loop():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(6, 2 * 4)) for _ in range(3))
    param = {"calcType": 3, "maskType": 9, "headNum": 2, "kvHeadNum": 2, "qkScale": 0.5}
    (out,) = computed("SelfAttentionOperation")(param, [q, k, v, np.array([6])])
    want = _attention_loops(*(t.reshape(6, 2, 4) for t in (q, k, v)), 0.5, 0)
    np.testing.assert_allclose(out.reshape(6, 2, 4), want, rtol=1e-12)
    # Paged: the same keys/values in shuffled cache blocks, the last token as the query.
    kc, vc = np.zeros((4, 2, 2, 4)), np.zeros((4, 2, 2, 4))
    table = np.array([[3, 0, 2]])
    for j in range(6):
        b, o = table[0, j // 2], j % 2
        kc[b, o], vc[b, o] = k[j].reshape(2, 4), v[j].reshape(2, 4)
    pa = {"headNum": 2, "kvHeadNum": 2, "qkScale": 0.5, "maskType": 0}
    (last,) = computed("PagedAttentionOperation")(pa, [q[5:6], kc, vc, table, np.array([6])])
    np.testing.assert_allclose(last.reshape(2, 4), want[5], rtol=1e-12)
    with pytest.raises(NotReplayable, match="calcType=0"):
        computed("SelfAttentionOperation")({**param, "calcType": 0}, [q, k, v, np.array([6])])


def test_activation_and_elewise_references():
    x = np.linspace(-4, 4, 9)
    (y,) = computed("ActivationOperation")({"activationType": 6, "dim": -1},
                                             [np.concatenate([x, x])[None, :]])
    np.testing.assert_allclose(y[0], x / (1 + np.exp(-x)) * x, rtol=1e-12)
    (y,) = computed("ActivationOperation")({"activationType": 4, "scale": 1.0}, [x])
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-12)
    (y,) = computed("ElewiseOperation")({"elewiseType": 2, "mulsParam": {"varAttr": 3.0}},
                                          [x])
    np.testing.assert_allclose(y, 3 * x)
    with pytest.raises(NotReplayable, match="elewiseType=17"):
        computed("ElewiseOperation")({"elewiseType": 17}, [x])
    with pytest.raises(NotReplayable, match="activationType=7"):
        computed("ActivationOperation")({"activationType": 7}, [x])


def test_judge_tells_overflow_from_own_error():
    r = np.array([1.0, 2.0, 70000.0])
    dumped = np.array([1.0, 2.0, np.inf], dtype=np.float16)
    v = judge_output(dumped, r, "float16")
    assert v["verdict"] == "overflow" and "7e+04 > float16 max 65504" in v["why"]
    dumped = np.array([1.0, 2.5, np.inf], dtype=np.float16)
    v = judge_output(dumped, r, "float16")
    assert v["verdict"] == "own-error" and v["worst"]["index"] == [1]
    v = judge_output(np.array([1.0, 2.001], dtype=np.float16), np.array([1.0, 2.0]), "float16")
    assert v["verdict"] == "ok"
    assert judge_output(np.array([3, 4]), np.array([3.0, 5.0]), "int64")["verdict"] == "own-error"


def test_stats_compare_and_report_give_the_verdict_of_the_op_at_fault(dumps, tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["stats", str(dumps["injected"]), "--json"])
    first = json.loads(out.getvalue())["first_nonfinite"][0]
    assert first["replay"]["verdict"] == "own-error"
    assert first["replay"]["path"].endswith("0/1_Prefill_layer/5_SelfAttentionOperation")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["compare", "-gp", str(dumps["golden"]), "-tp", str(dumps["injected"]),
              "-o", str(tmp_path / "c.csv"), "--json"])
    replayed = json.loads(out.getvalue())["first_divergence_replay"]
    assert replayed["verdict"] == "own-error" and replayed["worst"]["dumped"] == "inf"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["report", str(dumps["injected"]), "--golden", str(dumps["golden"]), "-o",
              str(tmp_path / "r.html")])
    page = (tmp_path / "r.html").read_text()
    card = page[page.index("Is it the op? (replay)"):]
    assert "own-error: the op&#x27;s inputs are finite" in card[:600]
    assert "<dt>dumped</dt><dd>inf</dd>" in card[:1200]


def test_data_movement_and_norm_references():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4, 6))
    (y,) = computed("SoftmaxOperation")({"axes": [-1]}, [x])
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-12)
    (y,) = computed("TransposeOperation")({"perm": [2, 0, 1]}, [x])
    assert y.shape == (6, 3, 4) and y[5, 2, 3] == x[2, 3, 5]
    (y,) = computed("ConcatOperation")({"concatDim": 1}, [x, x[:, :1]])
    assert y.shape == (3, 5, 6) and (y[:, 4] == x[:, 0]).all()
    a, b = computed("SplitOperation")({"splitDim": -1, "splitSizes": [2, 4]}, [x])
    assert a.shape == (3, 4, 2) and (b == x[..., 2:]).all()
    (y,) = computed("GatherOperation")({"axis": 1}, [x, np.array([3, 0])])
    assert (y[:, 0] == x[:, 3]).all() and (y[:, 1] == x[:, 0]).all()
    with pytest.raises(NotReplayable, match="index 4 is outside"):
        computed("GatherOperation")({"axis": 1}, [x, np.array([4])])
    g = rng.normal(size=6)
    rms = np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6)
    norm = {"epsilon": 1e-6}
    (y,) = computed("RmsNormOperation")({"layerType": 1, "normParam": norm}, [x, g])
    np.testing.assert_allclose(y, x / rms * g, rtol=1e-12)
    (y,) = computed("RmsNormOperation")(
        {"layerType": 1, "normParam": {**norm, "modelType": 1}}, [x, g])
    np.testing.assert_allclose(y, x / rms * (1 + g), rtol=1e-12)
    with pytest.raises(NotReplayable, match="layerType=2"):
        computed("RmsNormOperation")({"layerType": 2}, [x, g])
    w = rng.normal(size=(5, 6))
    (y,) = computed("LinearOperation")({"hasBias": True}, [x, w, np.arange(5.0)])
    np.testing.assert_allclose(y, x @ w.T + np.arange(5.0), rtol=1e-12)
    with pytest.raises(NotReplayable, match="quantMode=1"):
        computed("LinearOperation")({"quantMode": 1, "hasBias": False}, [x, w])
