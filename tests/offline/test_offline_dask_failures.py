"""A compare whose Dask cluster fails says what the cluster could not do (dead
workers, workers that cannot read the dumps) and exits 1 as the README says, not
3 with "the dumps do not line up". A real `dask scheduler` and `dask worker`s
on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
from test_offline_dask import _wait, dask_cluster, fifo_opened, hold_before, rank_dump

from msprobe_atb.offline.compare.dask_run import BLIND

N_PAIRS = 24  # rank_dump without the big tensor


def _compare(golden, target, addr: str, out) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "msprobe_atb", "compare", "-gp", str(golden),
                             "-tp", str(target), "--scheduler", addr, "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _said_what_the_cluster_could_not_do(stdout: str, why: str) -> None:
    lines = stdout.splitlines()
    counts = next(line for line in lines if " pairs compared" in line)  # after the diagnosis
    assert counts.startswith(f"0 pairs compared, {N_PAIRS} not-compared (processes ")
    assert f"NOT A PASS: {N_PAIRS} tensor pair(s) were NOT compared, because:" in lines
    assert f"  - {N_PAIRS} pair(s): {why}" in lines
    assert "do not line up" not in stdout and "NOTHING WAS COMPARED" not in stdout


def test_workers_that_cannot_read_the_dumps_are_named_exit_1(tmp_path):
    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    rank_dump(tmp_path / "t", 0, 200, np.float16, 2, big=False)
    (tmp_path / "elsewhere").mkdir()
    with dask_cluster(tmp_path, {"w1": [tmp_path / "elsewhere"]}) as c:
        p = _compare(tmp_path / "g", tmp_path / "t", c["addr"], tmp_path / "r.csv")
        out, err = p.communicate(timeout=300)
    assert p.returncode == 1, err
    _said_what_the_cluster_could_not_do(out, BLIND)


def test_killed_workers_are_named_exit_1(tmp_path):
    """The only worker able to read the dumps is killed while it reads one (a
    FIFO holds it there): its address is named as gone."""
    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    rank_dump(tmp_path / "t", 0, 200, np.float16, 2, big=False)
    hold, _ = hold_before(tmp_path / "t", 0)
    with dask_cluster(tmp_path, {"w1": [tmp_path]}) as c:
        p = _compare(tmp_path / "g", tmp_path / "t", c["addr"], tmp_path / "r.csv")
        fd = _wait(lambda: fifo_opened(hold), "the worker to open the FIFO")
        c["procs"]["w1"].send_signal(signal.SIGKILL)
        c["procs"]["w1"].wait()
        os.close(fd)
        out, err = p.communicate(timeout=300)
    assert p.returncode == 1, err
    gone = c["workers"]["w1"]
    _said_what_the_cluster_could_not_do(
        out, f"the Dask worker(s) able to read their files left the cluster ({gone}): "
        "killed, crashed or out of memory? restart them and compare again")
