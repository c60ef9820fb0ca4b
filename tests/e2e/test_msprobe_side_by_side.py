"""The same config under msProbe 26.2.0's own shim and under ours, on the same
stand-in model: `.bin` and `info/` files byte for byte the same, and every statistic
msProbe prints with 6 decimals (`%f`) is ours rounded so, ours written without an
exponent. msProbe's shim is the one `make bench` downloads (build/msprobe_ref,
`make msprobe-ref`); without it the test is skipped, saying so."""

from __future__ import annotations

import csv
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from e2e_helpers import REPO, atb_home, atbsim_bin, fresh_env, require_artifacts, run_dump

MODEL = ["--layers", "2", "--hidden", "32", "--vocab", "64"]
CONFIG = {"task": "all", "dump_enable": True, "exec_range": "0,0", "ids": "", "op_name": "",
          "save_child": True, "filter_level": 1}


def msprobe_shim(abi: int) -> Path:
    shim = REPO / "build" / "msprobe_ref" / "msprobe" / "lib" / f"libatb_probe_abi{abi}.so"
    if not shim.is_file():
        pytest.skip(f"msProbe 26.2.0's shim is not there ({shim}): `make msprobe-ref` "
                    "downloads it")
    return shim


def msprobe_dump(out: Path, abi: int, **cfg) -> Path:
    """atbsim run under msProbe's shim with CONFIG and `cfg`; its atb_dump_data. The
    shim loads $ASCEND_TOOLKIT_HOME/lib64/libascendcl.so: here the stand-in's,
    through a link."""
    toolkit = out / "toolkit"
    toolkit.mkdir(parents=True)
    (toolkit / "lib64").symlink_to(atb_home(abi) / "lib")
    config = out / "config.json"
    config.write_text(json.dumps({**CONFIG, **cfg}))
    env = dict(fresh_env(), ATB_HOME_PATH=str(atb_home(abi)),
               LD_LIBRARY_PATH=str(atb_home(abi) / "lib"), LD_PRELOAD=str(msprobe_shim(abi)),
               ATB_OUTPUT_DIR=str(out), ATB_DUMP_CONFIG=str(config),
               ASCEND_TOOLKIT_HOME=str(toolkit))
    p = subprocess.run([str(atbsim_bin(abi)), "run", *MODEL], env=env, cwd=out,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out / "atb_dump_data"


def info_files(root: Path) -> dict[str, bytes]:
    """info/{layer,model}/{dev}_{pid}/NAME.json by kind and name (the pids differ)."""
    return {f"{f.parent.parent.name}/{f.name}": f.read_bytes()
            for f in root.glob("info/*/*/*.json")}


def tensor_files(root: Path) -> dict[str, bytes]:
    """Every .bin by its path below the process dir, but msProbe's `data=` alias
    stubs (ours are hard links to the same bytes)."""
    out = {}
    for f in root.glob("data/*/*/**/*.bin"):
        blob = f.read_bytes()
        if b"\ndata=" not in blob.partition(b"$End=1\n")[0]:
            out["/".join(f.relative_to(root / "data").parts[1:])] = blob
    return out


def statistics(root: Path) -> dict[tuple[str, str], list[str]]:
    """Max, Min, Mean, Norm of every row, by round and Tensor Path below the process."""
    out = {}
    for f in root.glob("data/*/*/statistic.csv"):
        with open(f, newline="") as fh:
            for row in csv.DictReader(fh):
                path = row["Tensor Path"].split(f"/{f.parent.parent.name}/", 1)[1]
                out[(f.parent.name, path)] = [row[k] for k in ("Max", "Min", "Mean", "Norm")]
    return out


@pytest.mark.parametrize("abi", [0, 1], ids=["abi0", "abi1"])
def test_info_files_and_statistics_read_as_msprobes(tmp_path, service_env, abi):
    require_artifacts(abi)
    theirs = msprobe_dump(tmp_path / "msprobe", abi)
    (tmp_path / "ours").mkdir()
    ours = run_dump(tmp_path / "ours", service_env, abi, MODEL, **CONFIG).parent
    want = info_files(theirs)
    assert sum(k.startswith("model/") for k in want) == 2  # prefill and decode
    assert info_files(ours) == want
    theirs_bins, our_bins = tensor_files(theirs), tensor_files(ours)
    assert len(theirs_bins) > 100 and all(our_bins[k] == v for k, v in theirs_bins.items())
    msprobe_stats, our_stats = statistics(theirs), statistics(ours)
    assert msprobe_stats and set(msprobe_stats) <= set(our_stats)
    for key, cells in msprobe_stats.items():
        mine = our_stats[key]
        assert not any("e" in c for c in mine), (key, mine)
        # msProbe: integers as integers, doubles as %f
        assert [c if "." not in theirs else f"{float(c):f}"
                for c, theirs in zip(mine, cells)] == cells, key


def bins_by_depth(root: Path) -> dict[str, Counter]:
    """Per top-level op (its name without the id), the .bin files by how deep they
    lie: 1 the op's own, 2 a child op's, 3 a kernel's."""
    out: dict[str, Counter] = {}
    for f in root.glob("data/*/*/**/*.bin"):
        parts = f.relative_to(root / "data").parts[2:]  # below {dev}_{pid}/{round}
        out.setdefault(parts[0].partition("_")[2], Counter())[len(parts) - 2] += 1
    return out


def test_filter_level_2_and_one_round_as_the_readme_says(tmp_path, service_env):
    """The README's differences: filter_level 2 (msProbe keeps kernel tensors and
    the layer-level ones of WordEmbedding and LmHead only; we keep layer and
    child-op tensors and stub kernels), and exec_range "N" (msProbe dumps nothing)."""
    abi = 1
    require_artifacts(abi)
    theirs = bins_by_depth(msprobe_dump(tmp_path / "msprobe", abi, filter_level=2))
    assert set(theirs) == {"WordEmbedding", "Prefill_layer", "LmHead", "Decoder_layer"}
    for name, depths in theirs.items():
        assert depths[2] == 0 and depths[3] > 0, (name, depths)
        assert (depths[1] > 0) == (name in ("WordEmbedding", "LmHead")), (name, depths)
    (tmp_path / "ours").mkdir()
    ours = run_dump(tmp_path / "ours", service_env, abi, MODEL, **{**CONFIG, "filter_level": 2})
    for name, depths in bins_by_depth(ours.parent).items():
        assert depths[1] > 0 and depths[2] > 0, (name, depths)
    kernels = {(e["Op Name"].count("/"), e["Data Status"]) for s in ours.glob("*/*/")
               for e in csv.DictReader(open(s / "statistic_extra.csv", newline=""))}
    assert {status for depth, status in kernels if depth == 2} == {"stub"}
    one = msprobe_dump(tmp_path / "msprobe-one", abi, exec_range="0")
    assert not list(one.glob("data/**/*.bin"))
    (tmp_path / "ours-one").mkdir()
    assert list(run_dump(tmp_path / "ours-one", service_env, abi, MODEL,
                         **{**CONFIG, "exec_range": "0"}).glob("*/0/**/*.bin"))
