"""`msprobe-atb bisect` on real stand-in dumps: seeded faults found, clean runs
naming no op, the evaluation bound, and the emulation's predictions held against the
stand-in rerun without each fault."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
from functools import partial

import numpy as np
import pytest
from offline_helpers import ABI, make_real_dump, module_real_dump, need_real, side_by_side
from testkit import atb_home, atbsim_bin, scratch_dir

from msprobe_atb.cli import main
from msprobe_atb.offline.bisect.search import relative_error

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

# 4 layers of hidden 512 (the stand-in's precision faults reduce over 512 to 1024 terms,
# enough to move the logits past the dtype's own noise; at hidden 32 most do not) and a
# vocabulary of 1024 (the logits' error norm then varies little between two rounding
# trajectories): the prefill round has 56 leaf ops.
MODEL = ["--layers", "4", "--hidden", "512", "--heads", "8", "--vocab", "1024",
         "--prompt-len", "6", "--decode-steps", "0", "--seed", "5"]
VOCAB = 1024
# name -> (dtype, faults as atbsim options, the ops they hit as prefill op ids): kernel
# precision faults (docs/atbsim_model.md), and an op's output scaled (an own error)
PF, INJ = "--precision-fault", "--inject"
CASES = {
    "qkv_fp16": ("fp16", [(PF, "linear-fp16-accumulate:layer=0,op=QKV")], ["1_1"]),
    "postnorm_bf16": ("bf16", [(PF, "rmsnorm-fp16-accumulate:layer=1,op=PostNorm")], ["2_9"]),
    "gateup_bf16": ("bf16", [(PF, "linear-fp16-accumulate:layer=1,op=GateUp")], ["2_10"]),
    "down_fp16": ("fp16", [(INJ, "scale=1.02:layer=3,op=Down")], ["4_12"]),
    "two_fp16": ("fp16", [(PF, "linear-fp16-accumulate:layer=0,op=QKV"),
                          (INJ, "scale=1.03:layer=2,op=SwiGLU")], ["1_1", "3_11"]),
    "two_bf16": ("bf16", [(PF, "linear-fp16-accumulate:layer=0,op=QKV"),
                          (PF, "rmsnorm-fp16-accumulate:layer=3,op=PostNorm")], ["1_1", "4_9"]),
}


def bisect(*args) -> tuple[int, dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["bisect", *map(str, args), "--json"])
    return rc, json.loads(out.getvalue())


def _options(faults: list[tuple[str, str]]) -> list[str]:
    return [a for f in faults for a in f]


def logits_of_run(path, dtype: str, faults: list[tuple[str, str]]) -> np.ndarray:
    """The prefill logits of the stand-in run without the probe (--logits-out)."""
    home = atb_home(ABI)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("ATB_")}
    env.update(ATB_HOME_PATH=str(home), LD_LIBRARY_PATH=f"{home / 'lib'}")
    subprocess.run([str(atbsim_bin(ABI)), "run", "--dtype", dtype, *MODEL, *_options(faults),
                    "--logits-out", str(path)], env=env, check=True, capture_output=True,
                   timeout=120)
    return np.fromfile(path, dtype=np.float32)[:VOCAB]


@pytest.fixture(scope="module")
def dumps_dir(tmp_path_factory):
    """Where the cases' dumps go: ~30 MB each, written and removed at memory speed (on
    the shared disk, removing them took 15 s)."""
    yield from scratch_dir(tmp_path_factory.mktemp("bisect") / "fs", 1 << 20)


@pytest.fixture(scope="module")
def runs(dumps_dir):
    """Each case's dump and bisect result, and two clean dumps."""
    need_real()
    base = dumps_dir
    runs = {name: (dtype, faults) for name, (dtype, faults, _) in CASES.items()}
    runs.update({f"clean_{dtype}": (dtype, []) for dtype in ("fp16", "bf16")})
    dumps = side_by_side({n: partial(make_real_dump, base / n, dtype,
                                     model=[*MODEL, *_options(faults)])
                          for n, (dtype, faults) in runs.items()})
    out = {name: (d, *bisect(d)) for name, d in dumps.items()}
    yield out
    shutil.rmtree(base, ignore_errors=True)


def _bound_holds(doc: dict) -> bool:
    n, k = doc["searchable"], len(doc["chosen"])
    return doc["evaluations"] <= 2 * k * math.log2(n) + n


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_seeded_ops_are_found_and_their_promotion_reaches_the_target(runs, name):
    _, rc, doc = runs[name]
    seeded = set(CASES[name][2])
    chosen = {c["op_id"] for c in doc["chosen"]}
    assert rc == 0 and doc["reached"]
    assert seeded <= chosen and len(chosen - seeded) <= 1, (chosen, doc["ranking"][:4])
    assert doc["after"] <= doc["target"] < doc["before"]
    assert doc["searchable"] == doc["ops"] == 56 and not doc["excluded"]
    assert doc["deployed_drift"] == 0.0  # the deployed chain gives the dump back bit for bit
    assert _bound_holds(doc), doc["evaluations"]


def test_precision_and_recall_over_the_cases(runs):
    hits = found = seeded = 0
    for name, (_, _, ops) in CASES.items():
        chosen = {c["op_id"] for c in runs[name][2]["chosen"]}
        hits += len(chosen & set(ops))
        found += len(chosen)
        seeded += len(ops)
    assert hits / found >= 0.9 and hits / seeded >= 0.9


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_clean_run_needs_no_promotion(runs, dtype):
    _, rc, doc = runs[f"clean_{dtype}"]
    assert rc == 0 and doc["reached"] and doc["chosen"] == [] and doc["ranking"] == []
    assert doc["before"] <= doc["target"]
    assert _bound_holds(doc)


def _spearman(a: list[float], b: list[float]) -> float:
    ra, rb = (np.argsort(np.argsort(x)).astype(float) for x in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_predicted_removal_ranks_as_the_rerun_without_the_fault_measures(runs, tmp_path):
    """Per seeded op: the error its promotion alone removes in the chained run, against
    the error removed by running the stand-in without that fault (the others kept),
    both against the dump's all-float64 chained run."""
    from msprobe_atb.offline.bisect.chain import Chain
    from msprobe_atb.offline.read.table import filter_tensors, open_dump
    predicted, measured = [], []
    for name, (dtype, faults, ops) in CASES.items():
        d, _, doc = runs[name]
        dump = open_dump(d)
        dump.tensors = filter_tensors(dump.tensors, round=0)
        golden = Chain(dump, 0).run(rest="promoted")[-1][0]
        before = relative_error(logits_of_run(tmp_path / "all.bin", dtype, faults), golden)
        removed = {r["op_id"]: r["removed"] for r in doc["ranking"]}
        for fault, op in zip(faults, ops):
            rest = [f for f in faults if f != fault]
            after = relative_error(logits_of_run(tmp_path / "one.bin", dtype, rest), golden)
            predicted.append(removed[op])
            measured.append(before - after)
    assert _spearman(predicted, measured) >= 0.8, list(zip(predicted, measured))


def test_the_report_shows_the_ranking_of_a_bisect_result_beside_the_dump(runs, tmp_path):
    d, _, doc = runs["postnorm_bf16"]
    (d / "bisect.json").write_text(json.dumps(doc))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(d), "-o", str(tmp_path / "r.html"), "--json"]) == 0
    info = json.loads(out.getvalue())
    assert "precision" in info["sections"] and info["bisect"] == str(d / "bisect.json")
    page = (tmp_path / "r.html").read_text()
    assert "RmsNorm (node 9) in Prefill_layer 1" in page
    assert page.count("9_RmsNormOperation") >= 2  # in the set and at the top of the ranking
    (d / "bisect.json").write_text("{not json")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", str(d), "-o", str(tmp_path / "r.html")]) == 0
    assert "bisect.json</code>" not in (page := (tmp_path / "r.html").read_text())
    assert "bisect.json: cannot be read" in page
    (d / "bisect.json").unlink()


SMALL = ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64", "--prompt-len", "4",
         "--decode-steps", "2"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    yield from module_real_dump(tmp_path_factory, "bisect_small", "fp16", model=SMALL)


def test_a_decode_round_runs_on_its_dumped_kv_cache(small):
    """Round 1 holds decode step 1 alone: its model is the decode model, its attention
    reads the caches its ReshapeAndCache ops wrote in the chained run."""
    rc, doc = bisect(small, "--round", "1")
    assert rc == 0 and doc["model"] == "DecoderModel_Decoder" and doc["round"] == 1
    assert doc["deployed_drift"] == 0.0 and not doc["excluded"] and doc["chosen"] == []
    rc, doc = bisect(small, "--round", "1", "--target", "1e-9")  # every op's rounding counts
    assert any(r["op_type"] == "PagedAttentionOperation" for r in doc["ranking"])
    assert doc["metric"]["path"].endswith("/1/7_LmHead/2_LinearOperation")


def test_an_op_replay_cannot_recompute_is_named_and_kept_out(small):
    param = next((small / "atb_dump_data" / "data").glob(
        "*/0/2_Prefill_layer/7_ElewiseOperation/op_param.json"))
    kept = param.read_text()
    try:
        param.write_text('{"elewiseType": 99}')
        rc, doc = bisect(small)
    finally:
        param.write_text(kept)
    assert rc == 0 and [x["op_id"] for x in doc["excluded"]] == ["2_7"]
    assert "not replayable" in doc["excluded"][0]["why"] and "elewiseType=99" in \
        doc["excluded"][0]["why"]
    assert doc["searchable"] == doc["ops"] - 1 == 29
    assert doc["deployed_drift"] == 0.0  # it gives its dumped outputs in every run


@pytest.mark.parametrize("args, says", [
    (["--round", "5"], "no tensor in round 5"),
    (["--op", "2_9"], "--op names the op of --metric output"),
    (["--metric", "output", "--op", "9_9"], "no op 9_9 in DecoderModel_Prefill"),
    (["--model", "Nope"], "no model 'Nope' in info/model"),
    (["--target", "0"], "--target '0': expected a positive float"),
    (["--budget", "many"], "--budget 'many': expected a positive int"),
])
def test_bad_input_is_one_line_naming_it(small, capsys, args, says):
    assert main(["bisect", str(small), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("msprobe-atb bisect: error: ") and says in err and \
        err.count("\n") == 1, err


def test_a_dump_without_child_ops_says_what_to_dump(tmp_path, capsys):
    need_real()
    d = make_real_dump(tmp_path / "top", "fp16", model=SMALL, save_child=False)
    assert main(["bisect", str(d)]) == 2
    assert "dumped with its op_param.json" in capsys.readouterr().err


def test_a_budget_stops_the_search_with_the_best_set_seen(runs):
    d = runs["postnorm_bf16"][0]
    rc, doc = bisect(d, "--budget", "10")
    assert rc == 1 and doc["budget_spent"] and not doc["reached"] and doc["evaluations"] == 10
