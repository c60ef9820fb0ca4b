"""The torch dumper on small hand-made modules: which tensors a module's arguments and
output give, in which order and under which names and dtypes; a module called twice;
a forward that raises; a tensor that cannot be written (contracts §8)."""

from __future__ import annotations

import csv
import errno
import json

import numpy as np
import pytest
import torch
from torch import nn

from msprobe_atb.offline.read.binfile import load_bin, read_header
from msprobe_atb.torch import Dumper

ALL = {"dump_enable": True, "task": "all", "exec_range": "all", "save_child": True}


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.SiLU()

    def forward(self, x, scale=None, mask=None, flag=True):
        h = self.act(self.lin(x))
        if not bool(mask.all()):
            raise ValueError("a masked position")
        return {"out": self.act(h).to(torch.bfloat16), "aux": (h.half(), mask), "n": 3}


class Top(nn.Module):
    def __init__(self):
        super().__init__()
        self.pair = Pair()
        self.head = nn.Linear(4, 2)

    def forward(self, x, mask):
        return self.head(self.pair(x, scale=None, mask=mask, flag=False)["out"].float())


@pytest.fixture
def top():
    torch.manual_seed(0)
    return Top().eval()


def _proc(out):
    (proc,) = (out / "atb_dump_data" / "data").iterdir()
    return proc


def test_arguments_and_outputs_in_order_with_their_names_and_dtypes(top, tmp_path):
    x, mask = torch.randn(3, 4), torch.ones(3, dtype=torch.bool)
    with torch.no_grad(), Dumper(top, tmp_path, ALL) as dumper:
        y = top(x, mask)
    pair = _proc(tmp_path) / "0" / "0_Pair"
    assert sorted(p.name for p in pair.iterdir()) == ["0_Linear", "1_SiLU", "2_SiLU", "after",
                                                     "before"]
    assert sorted(p.name for p in (pair / "before").iterdir()) == ["intensor0.bin",
                                                                   "intensor1_mask.bin"]
    assert sorted(p.name for p in (pair / "after").iterdir()) == [
        "outtensor0_out.bin", "outtensor1_aux_0.bin", "outtensor2_aux_1.bin"]
    np.testing.assert_array_equal(load_bin(pair / "before/intensor0.bin"), x.numpy())
    codes = {f.name: read_header(f).dtype for f in (pair / "after").iterdir()}
    assert codes == {"outtensor0_out.bin": 27, "outtensor1_aux_0.bin": 1,
                     "outtensor2_aux_1.bin": 12}
    out_bf16 = load_bin(pair / "after/outtensor0_out.bin")
    h = torch.nn.functional.silu(top.pair.lin(x)).detach()
    np.testing.assert_array_equal(out_bf16, torch.nn.functional.silu(h).to(torch.bfloat16)
                                  .float().numpy())
    assert load_bin(pair / "after/outtensor2_aux_1.bin").tolist() == [True] * 3
    np.testing.assert_array_equal(load_bin(_proc(tmp_path) / "0/1_Linear/after/outtensor0.bin"),
                                  y.numpy())
    # scale=None, flag=False in, "n": 3 out
    assert dumper.counts.skipped == 3 and dumper.counts.errors == 0
    # no HF base model: the top module alone is the model; info names each op's module
    layer = json.loads(next((tmp_path / "atb_dump_data/info/layer").glob("*/Pair_0.json"))
                       .read_text())
    assert [n["param"]["module"] for n in layer["nodes"]] == ["pair.lin", "pair.act", "pair.act"]


def test_a_forward_that_raises_leaves_the_next_rounds_whole(top, tmp_path):
    x, ok = torch.randn(3, 4), torch.ones(3, dtype=torch.bool)
    with torch.no_grad(), Dumper(top, tmp_path, ALL):
        top(x, ok)
        with pytest.raises(ValueError):
            top(x, torch.zeros(3, dtype=torch.bool))
        top(x, ok)
    proc = _proc(tmp_path)
    whole = sorted(str(p.relative_to(proc / "0")) for p in (proc / "0").rglob("*.bin"))
    assert sorted(str(p.relative_to(proc / "2")) for p in (proc / "2").rglob("*.bin")) == whole
    # round 1 stopped inside 0_Pair: its inputs and its first two children are there
    assert sorted(str(p.relative_to(proc / "1")) for p in (proc / "1").rglob("*.bin")) == [
        "0_Pair/0_Linear/after/outtensor0.bin", "0_Pair/0_Linear/before/intensor0.bin",
        "0_Pair/1_SiLU/after/outtensor0.bin", "0_Pair/1_SiLU/before/intensor0.bin",
        "0_Pair/before/intensor0.bin", "0_Pair/before/intensor1_mask.bin"]
    assert all((proc / r / "ROUND_COMPLETE.json").is_file() for r in ("0", "1", "2"))


def test_a_tensor_that_cannot_be_written_is_lost_and_the_model_runs_on(top, tmp_path,
                                                                       monkeypatch):
    from msprobe_atb.torch import dumper as dumper_mod

    def full_disk(dir_fd, name, write):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(dumper_mod.fsio, "write_streamed_at", full_disk)
    x, mask = torch.randn(3, 4), torch.ones(3, dtype=torch.bool)
    with torch.no_grad(), Dumper(top, tmp_path, ALL) as dumper:
        y = top(x, mask)
    assert torch.equal(y, top(x, mask).detach())
    rnd = _proc(tmp_path) / "0"
    with open(rnd / "statistic_extra.csv", newline="") as f:
        extra = list(csv.DictReader(f))
    assert extra and all(r["Data Status"] == "lost" and "No space" in r["Note"] for r in extra)
    assert json.loads((rnd / "ROUND_COMPLETE.json").read_text())["lost"] == len(extra)
    assert dumper.counts.errors == len(extra) and not list(rnd.rglob("*.bin"))


@pytest.mark.parametrize("device, dumped", [("0", True), ("1", False), ("1,0", True)])
def test_the_device_filter_sees_the_cpu_as_device_0(top, tmp_path, device, dumped):
    with torch.no_grad(), Dumper(top, tmp_path, {**ALL, "device": device}):
        top(torch.randn(3, 4), torch.ones(3, dtype=torch.bool))
    assert (tmp_path / "atb_dump_data" / "data").is_dir() == dumped


def test_a_second_dump_of_the_process_into_the_same_output_is_refused(top, tmp_path):
    x, mask = torch.randn(3, 4), torch.ones(3, dtype=torch.bool)
    with torch.no_grad(), Dumper(top, tmp_path, ALL):
        top(x, mask)
    before = sorted(p.name for p in (tmp_path / "atb_dump_data").rglob("*"))
    with pytest.raises(FileExistsError, match="give another output directory"):
        with Dumper(top, tmp_path, ALL):
            top(x, mask)
    assert sorted(p.name for p in (tmp_path / "atb_dump_data").rglob("*")) == before
    assert not top._forward_hooks and not top._forward_pre_hooks


class Broadcast(nn.Module):
    def forward(self, x):
        return x.expand(1 << 30)  # 4 bytes of storage, 4 GiB as a copy


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.broadcast = Broadcast()

    def forward(self, x):
        return self.broadcast(x)[:4].sum()


def test_a_broadcast_view_is_counted_lost_before_it_is_copied(tmp_path):
    """The view was once copied into a 4 GiB tensor (lost under a 4 GB limit)."""
    import tracemalloc

    x, model = torch.ones(1), Model()
    tracemalloc.start()
    try:
        with torch.no_grad(), Dumper(model, tmp_path, ALL) as dumper:
            model(x)
            peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    rnd = _proc(tmp_path) / "0"
    with open(rnd / "statistic_extra.csv", newline="") as f:
        extra = list(csv.DictReader(f))
    out = next(r for r in extra if r["Input/Output"] == "output")
    assert out["Data Status"] == "lost" and "4 bytes of storage repeated to [1073741824]" in \
        out["Note"]
    assert any(r["Input/Output"] == "input" and r["Data Status"] == "bin" for r in extra)
    assert dumper.counts.errors == 1 and peak < 64 << 20
