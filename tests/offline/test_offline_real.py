"""The offline tools on real dumps: the stand-in ATB run under the real probe,
fp32 golden vs fp16 target, and fp16 with an Inf injected into layer 0's
Attention at prefill round 0 (conftest.INJECT)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import polars as pl
import pytest
from offline_helpers import INJECT, INJECT_OP, run_cli
from testkit import REPO

from msprobe_atb.offline import compare_dumps, load_bin, open_dump, read_header
from msprobe_atb.offline.stats.overflow import overflow_events
from msprobe_atb.offline.stats.summary import summarize

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

# Layer 0 of the prefill model is top-level op 1 (op 0 is WordEmbedding); its
# Attention is node 5 (InputNorm QKV SplitQKV Rope ReshapeAndCache Attention ...).
INJECTED = "1_Prefill_layer/5_"


def _is_injected_op(op: str) -> bool:
    return op.startswith(INJECTED) and INJECT_OP in op.split("/")[1]


def test_clean_pair_all_pass(real_dumps, tmp_path):
    res = compare_dumps(open_dump(real_dumps["golden"]), open_dump(real_dumps["target"]))
    rows = res.rows
    assert rows.height > 500
    assert res.count("golden-only") == res.count("target-only") == 0
    assert set(rows.get_column("mode")) == {"tensor"}
    assert res.count("fail") == 0 and res.count("pass") == rows.height
    # Kernel names carry the dtype, so they pair by op id, and say so.
    renamed = rows.filter(pl.col("reason").str.contains("matched by op id"))
    assert renamed.height > 0
    assert set(rows.get_column("golden_dtype")) >= {"float"}
    assert "float16" in set(rows.get_column("target_dtype"))
    fp = rows.filter(pl.col("target_dtype") == "float16")
    assert fp.get_column("cosine").min() > 0.999
    assert fp.get_column("rtol").unique().to_list() == [1e-3]
    rc, out = run_cli("compare", "-gp", str(real_dumps["golden"]), "-tp",
                      str(real_dumps["target"]), "-o", str(tmp_path / "c.csv"))
    assert rc == 0 and "No divergent tensor" in out
    # A stricter verdict finds fp16 rounding: the verdict follows the thresholds.
    rc, out = run_cli("compare", "-gp", str(real_dumps["golden"]), "-tp",
                      str(real_dumps["target"]), "-o", str(tmp_path / "s.csv"),
                      "--min-within", "1.0")
    assert rc == 1 and "FIRST DIVERGENT op" in out and "within rtol 0.001" in out


def test_injected_inf_named_first_by_stats_overflow_compare(real_dumps, tmp_path):
    inj = real_dumps["injected"]
    s = summarize(open_dump(inj, fill_stats=True))
    first = s["first_nonfinite"][0]
    assert _is_injected_op(first["op"]) and first["io"] == "output" and first["round"] == 0
    assert first["pinf"] == 1
    assert first["upstream"], "info/layer dataflow gives the feeding ops"
    assert any("Rope" in (u.get("op") or "") for u in first["upstream"])

    ev = overflow_events(open_dump(inj, fill_stats=True))
    assert _is_injected_op(ev[0]["op"]) and ev[0]["round"] == 0
    assert any(t["io"] == "output" and t["pinf"] == 1 for t in ev[0]["tensors"])

    res = compare_dumps(open_dump(real_dumps["golden"]), open_dump(inj))
    fd = res.rows.filter((pl.col("verdict") == "fail") & pl.col("primary")).row(0, named=True)
    assert fd["op"] == first["op"] and fd["io"] == "output" and fd["nonfinite_match"] is False

    rc, out = run_cli("stats", str(inj))
    # rounds are named by model: the injected op runs in the prefill
    assert f"FIRST NaN/Inf in {first['dev_pid']}: prefill round 0, {first['op']} output 0" \
        in out
    rc, out = run_cli("overflow", str(inj))
    assert out.splitlines()[1].endswith(f"prefill round 0 {first['op']}")
    rc, out = run_cli("compare", "-gp", str(real_dumps["golden"]), "-tp", str(inj),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 1
    assert f"FIRST DIVERGENT op (target execution order): prefill round 0, {first['op']} " \
        "output 0" in out
    # msProbe's N/A for its errors where NaN/Inf sit apart; ours over the finite elements
    assert "\n  NaN/Inf: target 1 +Inf; golden none (different positions)\n  cosine, max abs " \
        "err, max rel err: N/A (NaN/Inf at different positions)\n  over the elements finite " \
        "on both sides (of " in out
    growth = out.split("Largest error growth")[1].splitlines()[1]
    assert first["op"] + ":" in growth and "(xinf)" in growth


def test_overflow_task_dump_names_the_kernel(overflow_dump):
    rc, out = run_cli("overflow", str(overflow_dump))
    lines = out.splitlines()
    assert "from the overflow log" in lines[0]
    assert INJECTED in lines[1] and "Attention" in lines[1]
    assert "+inf 1" in out


def test_linked_duplicates_read_and_compare(real_dumps):
    """filter_level 1 stores identical tensors once as hard links: each linked row
    reads in full (no data= stub to follow) and compares like any other."""
    d = open_dump(real_dumps["golden"])
    linked = d.tensors.filter(pl.col("status") == "linked")
    assert linked.height > 0
    for p in linked.get_column("path").to_list()[:40]:
        h = read_header(p)
        assert not h.is_stub and os.stat(p).st_nlink > 1
        assert load_bin(p).size == h.numel
    target = open_dump(real_dumps["target"])
    res = compare_dumps(d, target)
    linked_rows = res.rows.filter(pl.col("target_path").is_in(
        target.tensors.filter(pl.col("status") == "linked").get_column("path").implode()))
    assert linked_rows.height > 0
    assert set(linked_rows.get_column("verdict")) == {"pass"}


def test_convert_real_round_trip_and_resume(real_dumps, tmp_path):
    src = real_dumps["target"] / "atb_dump_data" / "data"
    out = tmp_path / "npy"
    rc, text = run_cli("convert", str(src), "-o", str(out), "-j", "2")
    bins = sorted(src.rglob("*.bin"))
    assert rc == 0 and f"converted {len(bins)}," in text
    for b in bins[::25]:
        np.testing.assert_array_equal(np.load(out / b.relative_to(src).with_suffix(".npy")),
                                      load_bin(b))
    rc, text = run_cli("convert", str(src), "-o", str(out))
    assert f"converted 0, up to date {len(bins)}," in text


def test_corrupt_files_and_mismatched_structure(real_dumps, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(real_dumps["target"], bad, ignore=shutil.ignore_patterns(".probe"))
    d = open_dump(bad)
    victim = d.tensors.filter((pl.col("status") == "bin") & (pl.col("dtype") == "float16")) \
        .row(0, named=True)
    with open(victim["path"], "r+b") as f:
        f.truncate(os.path.getsize(victim["path"]) - 5)
    # A whole op missing on the target side: reported as golden-only, not dropped.
    gone = d.tensors.filter(pl.col("op_id") == "2_3")
    csv = next((bad / "atb_dump_data/data").glob("*/0/statistic.csv"))
    extra = csv.with_name("statistic_extra.csv")
    keep = [i for i, oid in enumerate(open_dump(csv.parent).tensors.sort("seq")
                                      .get_column("op_id")) if oid != "2_3"]
    for f in (csv, extra):
        lines = f.read_text().splitlines()
        f.write_text("\n".join([lines[0]] + [lines[i + 1] for i in keep]) + "\n")
    res = compare_dumps(open_dump(real_dumps["golden"]), open_dump(bad))
    unread = res.rows.filter(pl.col("verdict") == "unreadable")
    assert unread.height >= 1
    assert any(victim["path"] in r and "truncated" in r for r in unread.get_column("reason"))
    assert res.count("golden-only") == gone.filter(pl.col("round") == 0).height > 0
    rc, out = run_cli("compare", "-gp", str(real_dumps["golden"]), "-tp", str(bad),
                      "-o", str(tmp_path / "c.csv"))
    assert "unreadable 1" in out or "unreadable" in out
    assert rc == 1  # an unread tensor is not a pass
    assert "golden-only: prefill round 0 2_" in out
    rc, out = run_cli("stats", str(bad), "--verify")
    assert rc == 1, "a truncated file is a failed verification"
    assert "bad file(s), listed as problems" in out
    assert f"problem: {victim['path']}: file is truncated" in out, out[:3000]
    assert "lost " in out


def test_statistics_only_real_dump(stats_dump):
    rc, out = run_cli("stats", str(stats_dump))
    assert "files: none" in out
    line = next(x for x in out.splitlines() if x.startswith("FIRST NaN/Inf"))
    assert ": prefill round 0, " + INJECTED in line and "Attention" in line and "output 0" in line


def test_main_cli_entry(real_dumps):
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", "stats", "--json",
                        str(real_dumps["injected"])], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    if r.returncode != 0 and "ModuleNotFoundError" in r.stderr:
        pytest.fail(f"msprobe-atb CLI does not import: {r.stderr[-500:]}")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert _is_injected_op(s["first_nonfinite"][0]["op"])


def test_different_layer_counts_real(stats_dump_3_layers, stats_dump, tmp_path):
    """3-layer golden vs 2-layer target: the LmHead of one is not compared with
    a decoder layer of the other, and the structure difference comes first, after
    the diagnosis of the target alone (its pairs are not trusted)."""
    rc, out = run_cli("compare", "-gp", str(stats_dump_3_layers), "-tp", str(stats_dump),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 3, out[:2000]
    rc_alone, alone = run_cli("diagnose", str(stats_dump))
    assert out.startswith(alone + "STRUCTURE DIFFERS")
    rc, said = run_cli("diagnose", str(stats_dump), "--golden", str(stats_dump_3_layers))
    assert rc == 3 and said.startswith(alone)
    assert "\n  the comparison with the golden is incomplete: op names differ at " in said
    assert "3: golden Prefill_layer, target LmHead" in said, said
    assert "3: golden Prefill_layer, target LmHead" in out
    assert "model DecoderModel_Prefill differs (info/model): golden 3 Prefill_layer; target 2 " \
        "Prefill_layer\n  model DecoderModel_Decoder differs" in out
    res = pl.read_csv(tmp_path / "c.csv")
    assert res.filter((pl.col("op_id") == "3") & pl.col("verdict").is_in(["pass", "fail"])
                      ).height == 0


def test_inject_help_names_the_op_ids_the_tools_print(real_dumps):
    """atbsim's --inject help says layer=N is op N+1_Prefill_layer (N+L+3 in
    decode); the tools print exactly those op ids."""
    from offline_helpers import MODEL
    from testkit import atbsim_bin
    help_text = subprocess.run([str(atbsim_bin(1)), "run", "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    assert "layer 1 is op 2_Prefill_layer" in help_text and "N+L+3 in decode" in help_text
    layers = int(MODEL[MODEL.index("--layers") + 1])
    t = open_dump(real_dumps["golden"]).tensors
    top = dict(t.filter(~pl.col("op_id").str.contains("_")).select("op_id", "op_name")
               .unique().iter_rows())
    for n in range(layers):
        assert top[str(n + 1)] == "Prefill_layer" and top[str(n + layers + 3)] == "Decoder_layer"
    inj_layer = int(INJECT.split("layer=")[1].split(",")[0])
    assert INJECTED.startswith(f"{inj_layer + 1}_Prefill_layer/")


def test_default_tensor_set_real(real_dumps):
    """By default the shim writes inputs before and outputs after each op only."""
    t = open_dump(real_dumps["golden"]).tensors
    assert t.height > 300 and t.get_column("primary").all()
    files = list((real_dumps["golden"] / "atb_dump_data" / "data").rglob("*.bin"))
    assert not [f for f in files if f.parent.name == "before" and f.name.startswith("out")]
    assert not [f for f in files if f.parent.name == "after" and f.name.startswith("in")]


def test_all_stages_statistics_real(all_stages_stats_dumps, tmp_path):
    """save_all_stages in a statistics-only dump: no Tensor Path, so the Stage
    column tells the four rows of an op apart; compare pairs stage with stage, and
    the in-place KV cache after ReshapeAndCache is compared."""
    g, t = all_stages_stats_dumps["fp32"], all_stages_stats_dumps["fp16"]
    d = open_dump(t)
    assert d.tensors.get_column("path").null_count() == d.tensors.height
    per = d.tensors.group_by("stage", "io").len()
    assert per.height == 4 and per.get_column("len").min() > 0
    rc, out = run_cli("stats", str(t))
    assert "stages: all four;" in out
    res = compare_dumps(open_dump(g), d)
    assert res.count("golden-only") == res.count("target-only") == 0
    cache = res.rows.filter(pl.col("op").str.contains("ReshapeAndCache") & (pl.col("stage")
                            == "after") & (pl.col("io") == "input"))
    assert cache.height > 0 and set(cache.get_column("verdict")) <= {"pass", "fail"}
    assert res.exit_code() in (0, 1) and not res.scope.incomplete


def test_stats_per_layer_peaks_are_float_and_say_nonfinite(real_dumps):
    """The per-layer largest norm and |x| are over float tensors (token ids
    and positions are integers), and a layer holding NaN/Inf never shows a finite one."""
    dump = open_dump(real_dumps["injected"], fill_stats=True)
    s = summarize(dump)
    df = dump.tensors.filter(pl.col("primary"))
    dtype_of = {(r["op_id"] + " " + r["io"] + r["index"]): r["dtype"]
                for r in df.iter_rows(named=True)}
    assert "int64" in dtype_of.values() or "int32" in dtype_of.values()
    bad_layers = 0
    for layer in s["layers"]:
        for value, at in ((layer["max_norm"], layer["max_norm_at"]),
                          (layer["max_abs"], layer["max_abs_at"])):
            assert dtype_of[at] in ("float", "float16"), (layer, at, dtype_of[at])
            if layer["nonfinite_tensors"]:
                assert value in ("nan", "inf"), layer
        bad_layers += bool(layer["nonfinite_tensors"])
    assert bad_layers >= 2
    rc, out = run_cli("stats", str(real_dumps["injected"]))
    table = out.split("Per layer, over its float tensors (a layer holding NaN/Inf shows nan or "
                      "inf, at its first such tensor):\n")[1].splitlines()
    assert len(table) == len(s["layers"]) + 1
    # fed by: ops with their statistics; the weights and inputs without any are counted
    fed = out.split("fed by (from info/layer, nearest first):\n")[1].split("\n", )
    fed = fed[:next(i for i, line in enumerate(fed) if not line.startswith("    "))]
    assert all(" of " not in line.split(" via ")[0] for line in fed), fed
    assert re.fullmatch(r"    and \d+ (weight|layer input|model input)s?(, \d+ .*)? \(no "
                        r"statistics: not an op's output\)", fed[-1]), fed
