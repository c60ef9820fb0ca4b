"""`msprobe-atb diagnose` on injected faults of every kind (a scale in a Linear, a
norm, an activation, attention; -inf/NaN/Inf in prefill and in a decode round;
fp16 and bf16; with and without an fp32 golden): it names the injected op as the
root cause, and stats, compare and the report's headline say the same lines. Clean
fp32, fp16 and bf16 runs name no cause.

Each dump runs two processes (devices 0 and 1), each with a fault of its own
(`--inject ...,device=N`), so one run holds two cases and each process gets its
own line. `make test` runs a quick subset (QUICK: a norm, a Linear, NaN in decode,
bf16 and fp16, the golden); `make fuzz` (fuzz-diagnose, tests/fuzz/diagnose_fuzz.py)
runs every case, with MSPROBE_ATB_TEST_DIAGNOSE_ALL=1."""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import shutil
from functools import partial
from pathlib import Path

import pytest
from offline_helpers import (
    llama_checkpoint,
    make_real_dump,
    module_real_dump,
    need_real,
    run_cli,
    side_by_side,
)
from testkit import scratch_dir

from msprobe_atb.cli import main
from msprobe_atb.tree.incidents import IncidentBook

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64", "--prompt-len",
         "4", "--decode-steps", "4", "--seed", "3"]
DEVICES = (0, 1)

# dump name -> (dtype, the fault of device 0, the fault of device 1)
FAULTY = {
    "norm_and_linear": ("fp16", "scale=1000:layer=0,op=PostNorm,stage=decode,round=2",
                        "scale=400:layer=1,op=QKV,stage=decode,round=3"),
    "nonfinite": ("fp16", "-inf:layer=1,op=Down,round=0",
                  "inf:layer=0,op=Rope,stage=decode,round=1"),
    "activation_and_attention": ("fp16", "scale=500:layer=0,op=SwiGLU,stage=decode,round=1",
                                 "scale=800:layer=1,op=Attention"),
    "bf16": ("bf16", "scale=300:layer=1,op=GateUp", "nan:layer=0,op=OProj,stage=decode,round=2"),
}
QUICK = ("norm_and_linear", "bf16")
EVERY_CASE = os.environ.get("MSPROBE_ATB_TEST_DIAGNOSE_ALL") == "1"
RUN = tuple(FAULTY) if EVERY_CASE else QUICK
CLEAN = ("fp16", "bf16") if EVERY_CASE else ("fp16",)
# (dump, device) -> the root cause diagnose must name, as its line begins
CAUSES = {
    ("norm_and_linear", 0): "root cause: 5_Decoder_layer/9_RmsNormOperation own-error "
                            "(device 0, decode round 2: output 1000x its float64 reference); "
                            "consequence: 5_Decoder_layer/11_ActivationOperation overflow (fp16)",
    ("norm_and_linear", 1): "root cause: 6_Decoder_layer/1_LinearOperation own-error "
                            "(device 1, decode round 3: output 3",
    ("nonfinite", 0): "root cause: 2_Prefill_layer/12_LinearOperation own-error "
                      "(device 0, prefill round 0: output -inf where float64 is",
    ("nonfinite", 1): "root cause: 5_Decoder_layer/3_RopeOperation own-error "
                      "(device 1, decode round 1: output inf where float64 is",
    ("activation_and_attention", 0): "root cause: 5_Decoder_layer/11_ActivationOperation "
                                     "own-error (device 0, decode round 1: output 5",
    ("activation_and_attention", 1): "root cause: 2_Prefill_layer/5_SelfAttentionOperation "
                                     "own-error (device 1, prefill round 0: output 8",
    ("bf16", 0): "root cause: 2_Prefill_layer/10_LinearOperation own-error "
                 "(device 0, prefill round 0: output 29",
    ("bf16", 1): "root cause: 5_Decoder_layer/6_LinearOperation own-error "
                 "(device 1, decode round 2: output nan where float64 is",
}


@pytest.fixture(scope="module")
def dumps_dir(tmp_path_factory):
    """Where the dumps go: thousands of files, written and removed at memory speed (on
    the shared disk, removing them took 20 s)."""
    yield from scratch_dir(tmp_path_factory.mktemp("diagnose") / "fs", 1 << 20)


@pytest.fixture(scope="module")
def dumps(dumps_dir):
    """The faulty dumps, a clean fp32 golden of the same model on both devices, and
    clean fp16 and bf16 runs (task tensor: the default)."""
    need_real()
    base = dumps_dir
    makers = {name: partial(make_real_dump, base / name, dtype, task="tensor", model=MODEL,
                            devices=DEVICES, inject=(f"{f0},device=0", f"{f1},device=1"))
              for name, (dtype, f0, f1) in FAULTY.items() if name in RUN}
    makers["golden"] = partial(make_real_dump, base / "golden", "fp32", task="tensor",
                               model=MODEL, devices=DEVICES)
    for dtype in CLEAN:
        makers[f"clean_{dtype}"] = partial(make_real_dump, base / f"clean_{dtype}", dtype,
                                           task="tensor", model=MODEL)
    yield side_by_side(makers)
    shutil.rmtree(base, ignore_errors=True)


def _diagnose(*args: str) -> tuple[int, dict]:
    rc, out = run_cli("diagnose", *args, "--json")
    return rc, json.loads(out)


def _check_causes(name: str, doc: dict) -> None:
    assert doc["found"] and len(doc["lines"]) == 2, doc["lines"]
    by_device = {c["dev_pid"].split("_")[0]: c["line"] for c in doc["causes"]}
    for dev in DEVICES:
        want = CAUSES[(name, dev)]
        assert by_device[str(dev)].startswith(want), (by_device[str(dev)], want)


@pytest.mark.parametrize("name", RUN)
def test_diagnose_names_the_injected_op(dumps, name):
    rc, doc = _diagnose(str(dumps[name]))
    assert rc == 1
    _check_causes(name, doc)
    # stats leads with the same lines, and carries them in --json
    rc, text = run_cli("stats", str(dumps[name]))
    assert text.splitlines()[:2] == doc["lines"]
    rc, stats = run_cli("stats", str(dumps[name]), "--json")
    assert json.loads(stats)["diagnosis"]["lines"] == doc["lines"]


@pytest.mark.parametrize("name", ["norm_and_linear", "bf16"])
def test_with_a_golden_compare_and_the_report_say_the_same(dumps, name, tmp_path):
    golden = str(dumps["golden"])
    rc, doc = _diagnose(str(dumps[name]), "--golden", golden)
    assert rc == 1
    _check_causes(name, doc)
    rc, text = run_cli("compare", "-gp", golden, "-tp", str(dumps[name]), "-o",
                       str(tmp_path / "c.csv"))
    assert rc == 1 and text.splitlines()[:2] == doc["lines"]
    rc, out = run_cli("report", str(dumps[name]), "--golden", golden, "-o",
                      str(tmp_path / "r.html"), "--json")
    info = json.loads(out)
    assert info["sections"][0] == "diagnosis" and info["diagnosis"]["lines"] == doc["lines"]
    page = (tmp_path / "r.html").read_text()
    assert all(html.escape(line) in page for line in doc["lines"])


@pytest.mark.parametrize("name", ["golden", *(f"clean_{dtype}" for dtype in CLEAN)])
def test_a_clean_run_names_no_cause(dumps, name):
    rc, doc = _diagnose(str(dumps[name]))
    assert (rc, doc["lines"], doc["causes"]) == (0, ["no cause found"], [])
    rc, text = run_cli("stats", str(dumps[name]))
    assert text.splitlines()[0] == "no cause found"


def test_a_clean_run_against_its_golden_names_no_cause(dumps):
    rc, doc = _diagnose(str(dumps["clean_fp16"]), "--golden", str(dumps["golden"]))
    assert (rc, doc["lines"]) == (0, ["no cause found"])


@pytest.mark.skipif(not EVERY_CASE, reason="its dump runs in make fuzz (fuzz-diagnose)")
def test_a_kv_cache_carrying_a_bad_value_is_named_a_cache(dumps):
    """Decode rounds 2-3 of device 1 after the Inf its Rope made in decode round 1:
    the key cache layer 1 reads carries it; the round that wrote it is not read."""
    import polars as pl

    from msprobe_atb.offline.diagnose.engine import diagnose
    from msprobe_atb.offline.diagnose.text import lines
    from msprobe_atb.offline.diagnose.walk import Walker, index_of
    from msprobe_atb.offline.read.table import filter_tensors, open_dump

    dump = open_dump(dumps["nonfinite"], fill_stats=True)
    later = filter_tensors(dump.tensors, round="2-3", device="1")
    (line,) = lines(diagnose(dump, later))
    assert line.startswith("root cause: KV cache DecoderModel_Decoder_kcache_1 read by "
                           "6_Decoder_layer (device 1, decode round 2) carries a bad value"), line
    # with the round that wrote it, the cause is the op itself
    mine = filter_tensors(dump.tensors, device="1")
    (line,) = lines(diagnose(dump, mine))
    assert line.startswith(CAUSES[("nonfinite", 1)]), line
    # and a walk from the cache layer 1 reads in decode round 2 goes through the op
    # that wrote the Inf into it in decode round 1, up to the Rope
    bad = {(r["dev_pid"], r["round"], r["op_id"], r["io"], index_of(r["index"]))
           for r in mine.filter(pl.col("nonfinite")).iter_rows(named=True)}
    walker = Walker(dump, mine, bad, bad)
    dev_pid = mine.get_column("dev_pid")[0]
    walk = walker.walk(walker.rep.by_id[(dev_pid, 2, "6")], "input", 6)
    assert [(h.tensor, h.writer.rel, h.writer.round) for h in walk.caches] == [
        ("DecoderModel_Decoder_kcache_1", "6_Decoder_layer/4_ReshapeAndCacheOperation", 1)]
    assert (walk.cause.verdict, walk.cause.op.rel, walk.cause.op.round) == (
        "own-error", "5_Decoder_layer/3_RopeOperation", 1)


def test_a_stale_kv_cache_is_named_a_cache(dumps):
    """Decode round 3 of device 0 reads the NaN the overflow of decode round 2 left in
    layer 1's key cache: stats (one dir or several) names it a cache."""
    cache = "DecoderModel_Decoder_kcache_1"
    rc, text = run_cli("stats", str(dumps["norm_and_linear"]), "--round", "3", "--device", "0")
    first = text.split("FIRST NaN/Inf in ")[1].splitlines()
    assert "decode round 3, 6_Decoder_layer input 6 " in first[0], first
    assert first[1] == f"  a KV cache ({cache}): it carries a value an earlier round wrote"
    assert text.startswith(f"root cause: KV cache {cache} read by 6_Decoder_layer (device 0, "
                           "decode round 3) carries a bad value written in an earlier round")
    rc, text = run_cli("stats", str(dumps["norm_and_linear"]), str(dumps["bf16"]))
    (said,) = [line for line in text.splitlines() if line.startswith("decode round 3: ")]
    assert said.endswith(f"6_Decoder_layer before input 6 (a KV cache, {cache}: it carries a "
                         "value an earlier round wrote)"), said


def test_bad_input_is_one_line(tmp_path):
    rc, out = run_cli("diagnose", str(tmp_path / "none"))
    assert rc == 2 and out == ""


def test_a_statistics_only_dump_says_replay_cannot_judge(stats_dump):
    """The Inf is found, but with no tensor files no op can be replayed: said, exit 3."""
    rc, out = run_cli("diagnose", str(stats_dump))
    assert rc == 3, out
    assert out.startswith("no cause found: 1_Prefill_layer/5_SelfAttentionOperation/"), out
    assert "replay cannot judge 1_Prefill_layer/5_SelfAttentionOperation: no input tensor" in out


NOT_DUMPED = ("its inputs were not dumped: dump them with task tensor to find whether the op "
              "or its inputs are at fault")


def test_an_overflow_atb_reported_with_no_inputs_is_named_as_reported(overflow_dump):
    """An overflow_check dump holds the reported kernel's outputs only: nothing can be
    replayed, so the op and ATB's report are the cause, with why no more is known."""
    rc, doc = _diagnose(str(overflow_dump))
    assert rc == 1, doc["lines"]
    assert doc["lines"] == ["root cause: ATB reported an overflow in 1_Prefill_layer/"
                            "5_SelfAttentionOperation/0_FlashAttentionKernel (prefill round 0); "
                            + NOT_DUMPED], doc["lines"]
    assert doc["causes"][0]["cause"]["finding"] == "ATB reported an overflow"
    rc, text = run_cli("stats", str(overflow_dump))
    assert text.splitlines()[0] == doc["lines"][0]


@pytest.fixture(scope="module")
def false_report_dump(tmp_path_factory):
    """bf16 2^121 (bits 0x7C00, an fp16 Inf to ATB's scan) in layer 1's SwiGLU output,
    under the overflow task."""
    yield from module_real_dump(tmp_path_factory, "false_report", "bf16", model=MODEL,
                                task="overflow_check", inject="value=0x1p121:layer=1,op=SwiGLU")


def test_atbs_false_report_of_a_finite_bf16_is_no_cause(false_report_dump):
    rc, doc = _diagnose(str(false_report_dump))
    assert (rc, doc["found"], doc["causes"]) == (0, False, []), doc["lines"]
    (line,) = doc["lines"]
    assert line.startswith("no cause found: ATB's overflow report of 2_Prefill_layer/"
                           "11_ActivationOperation/0_SwiGluKernel (prefill round 0) is false: "
                           "as bf16 its output holds no Inf or NaN (abs-max 2.65846e+36"), line
    rc, text = run_cli("stats", str(false_report_dump))
    assert text.splitlines()[0] == line


@pytest.fixture
def replays(monkeypatch) -> list[str]:
    """The path of every op a command replays (Replayer.replay), in order."""
    from msprobe_atb.offline.replay.runner import Replayer

    replayed: list[str] = []
    replay = Replayer.replay
    monkeypatch.setattr(Replayer, "replay", lambda self, op: replayed.append(op.path)
                        or replay(self, op))
    return replayed


def test_stats_replays_each_op_once(dumps, replays):
    """The replay line of stats' first NaN/Inf is the diagnosis' verdict on its op: no
    op is replayed a second time for it."""
    rc, text = run_cli("stats", str(dumps["norm_and_linear"]))
    assert "\n  replay: overflow (" in text, text
    assert replays and len(replays) == len(set(replays)), replays


def test_compare_replays_each_op_once(dumps, replays, tmp_path):
    """The replay line of compare's first divergent op is the diagnosis' verdict on its
    op, which the walk from that divergence replayed: not replayed again."""
    rc, text = run_cli("compare", "-gp", str(dumps["golden"]), "-tp",
                       str(dumps["norm_and_linear"]), "-o", str(tmp_path / "c.csv"))
    assert "\n  replay: own-error (" in text, text
    assert replays and len(replays) == len(set(replays)), replays


def test_incidents_replay_each_op_once(dumps, replays, tmp_path):
    """Two incidents at the first NaN/Inf of one process: one diagnosis of the process
    gives both their lines and their op's verdict, each op replayed once."""
    out = tmp_path / "incidents"
    shutil.copytree(dumps["norm_and_linear"], out, symlinks=True)
    rc, text = run_cli("stats", str(out), "--json")
    first = json.loads(text)["first_nonfinite"][0]
    root = next(out.rglob("atb_dump_data"))
    book = IncidentBook(root)
    for seq in (1, 2):
        book.add_trigger(seq, "inf", "inf", seq, first["round"],
                         str(Path(first["path"]).relative_to(root / "data")),
                         int(first["dev_pid"].split("_")[1]), {"pinf": 1})
    book.flush()
    replays.clear()  # stats' own
    said = io.StringIO()
    with contextlib.redirect_stdout(said):  # incidents is not an offline/cli.py command
        assert main(["incidents", str(out)]) == 0
    text = said.getvalue()
    assert text.count("\n  replay: overflow (") == 2, text
    assert replays and len(replays) == len(set(replays)), replays


@pytest.fixture(scope="module")
def scaled_weight_dump(tmp_path_factory):
    """A 4-layer checkpoint whose layer 2 Down weight is 1000x the others' (fp16)."""
    need_real()
    base = tmp_path_factory.mktemp("scaled_weight")
    weights = llama_checkpoint(base / "weights", layers=4, hidden=32, ffn=64, heads=2, vocab=64,
                               scaled={"model.layers.2.mlp.down_proj.weight": 1000.0})
    yield make_real_dump(base / "dump", "fp16", task="tensor", model=[
        "--weights", str(weights), "--prompt-len", "4", "--decode-steps", "1"])
    shutil.rmtree(base, ignore_errors=True)


def test_a_weight_far_past_its_other_layers_is_named_without_a_golden(scaled_weight_dump):
    """No NaN/Inf and no golden: the Down weight of layer 2 is judged against the same
    weight of the other layers, and named; the op that read it replays ok."""
    rc, doc = _diagnose(str(scaled_weight_dump))
    assert rc == 1, doc["lines"]
    (line,) = doc["lines"]
    assert line.startswith("root cause: weight DecoderModel_Prefill_weight_"), line
    # named with the op that reads it, the layer's Down Linear, not the layer
    assert line.endswith(" already bad when read by 3_Prefill_layer/12_LinearOperation (prefill "
                         "round 0: its norm is 1.01e+03x its median over the model's 4 layers, "
                         "no op of the dump wrote it)"), line
    cause = doc["causes"][0]["cause"]
    assert (cause["input"]["kind"], cause["op_type"]) == ("weight", "LinearOperation")
