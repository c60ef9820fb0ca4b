"""The torch dumper with several threads calling one model: each
call is a round of its own, and every tensor of every round is written, whole
and in its own round (the threads once shared one op stack: 4 threads lost 52
of 849 tensors, "graph Lin_0: 2 tensor ids out of range")."""

from __future__ import annotations

import csv
import logging
import threading

import numpy as np

from msprobe_atb.offline.read.binfile import load_bin

THREADS = 4
CALLS = 25  # per thread
OPS = ["0_Linear", "1_ReLU", "2_Linear"]


def test_threads_on_one_model_lose_no_tensor_and_mix_no_round(tmp_path, caplog):
    import torch
    from torch import nn

    from msprobe_atb.torch import Dumper

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    start = threading.Barrier(THREADS)

    def calls(k: int) -> None:
        x = torch.full((2, 8), float(k))
        start.wait()  # all threads in their rounds at once
        for _ in range(CALLS):
            model(x)

    caplog.set_level(logging.WARNING, logger="msprobe_atb")
    dumper = Dumper(model, output=tmp_path, config={"dump_enable": True, "task": "all",
                                                     "exec_range": "all"})
    with torch.no_grad(), dumper:
        threads = [threading.Thread(target=calls, args=(k,)) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    rounds = THREADS * CALLS
    c = dumper.counts
    assert (c.errors, c.tensors_selected, c.tensors_written) == (0, rounds * 6, rounds * 6)
    assert not [r.getMessage() for r in caplog.records]  # the builder found nothing amiss
    (proc,) = (tmp_path / "atb_dump_data" / "data").iterdir()
    assert sorted(int(p.name) for p in proc.iterdir()) == list(range(rounds))
    inputs = {}
    for rnd in proc.iterdir():
        assert sorted(p.name for p in rnd.iterdir() if p.is_dir()) == OPS
        assert (rnd / "ROUND_COMPLETE.json").exists()
        with open(rnd / "statistic.csv", newline="") as f:
            assert len(list(csv.DictReader(f))) == 6
        x = load_bin(rnd / "0_Linear/before/intensor0.bin")
        with torch.no_grad():  # one thread's call: its input gives its output
            want = model(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(load_bin(rnd / "2_Linear/after/outtensor0.bin"), want)
        inputs[x[0, 0]] = inputs.get(x[0, 0], 0) + 1
    assert inputs == {float(k): CALLS for k in range(THREADS)}
