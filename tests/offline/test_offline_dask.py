"""compare on a real Dask cluster: a `dask scheduler` and two `dask worker`
processes on 127.0.0.1, each given only its own node's dump root (two
simulated nodes holding different ranks, golden and target)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from offline_helpers import run_cli
from offline_synth import RoundWriter

from msprobe_atb.offline import compare_dumps
from msprobe_atb.offline.dumpset import open_dumps
from msprobe_atb.offline.metrics import CHUNK

DASK = Path(sys.executable).with_name("dask")
BIG = 2 * CHUNK + 12_345  # several chunks, so a moved pair travels in pieces
WAIT_S = 120  # generous deadline for processes to come up on a loaded machine
N_TENSORS = 25  # per rank: 4 layers of 6 tensors, and the big one


def rank_dump(out: Path, device: int, pid: int, dtype, seed: int, big: bool = True) -> Path:
    """One round of a toy model on one device, with one multi-chunk tensor."""
    rng = np.random.default_rng(seed)
    w = RoundWriter(out / "atb_dump_data" / "data", f"{device}_{pid}", 0)
    x = np.random.default_rng(device).standard_normal(64)
    for layer in range(4):
        lp = f"{layer + 1}_Layer"
        w.add(lp, "input", 0, x.astype(dtype))
        for ci, child in enumerate(("Norm", "Linear")):
            h = x / np.sqrt((x * x).mean() + 1e-6) if child == "Norm" else x * 1.5 + 0.1
            if layer == 2 and child == "Linear":  # a divergence the target shows
                h = h + (0.0 if dtype == np.float32 else 0.5)
            w.add(f"{lp}/{ci}_{child}", "input", 0, x.astype(dtype))
            w.add(f"{lp}/{ci}_{child}", "output", 0, h.astype(dtype))
            x = h
        w.add(lp, "output", 0, x.astype(dtype))
    if big:
        head = np.random.default_rng(device + 10).standard_normal(BIG)
        w.add("5_LmHead", "output", 0, (head + 1e-5 * rng.standard_normal(BIG)).astype(dtype))
    w.close()
    return out


def _wait(cond, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise RuntimeError(f"gave up waiting for {what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("dask")
    nodes = {"nodeA": 0, "nodeB": 1}
    for name, dev in nodes.items():
        rank_dump(base / name / "golden", dev, 100 + dev, np.float32, 1)
        rank_dump(base / name / "target", dev, 200 + dev, np.float16, 2)
    sched_file = base / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = {"scheduler": subprocess.Popen(
        [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(sched_file)], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)}
    try:
        addr = _wait(lambda: sched_file.is_file() and sched_file.stat().st_size and
                     json.loads(sched_file.read_text())["address"], "the scheduler")
        for name in nodes:
            procs[name] = subprocess.Popen(
                [str(DASK), "worker", addr, "--name", name, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--host", "127.0.0.1",
                 "--preload", "msprobe_atb.offline.dask_roots",
                 "--dump-root", str(base / name)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from distributed import Client
        with Client(addr, timeout=WAIT_S) as c:
            c.wait_for_workers(2, timeout=WAIT_S)
            names = {w["name"]: a for a, w in c.scheduler_info()["workers"].items()}
        yield {"base": base, "addr": addr, "workers": names, "procs": procs}
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def _dirs(base: Path, side: str, nodes=("nodeA", "nodeB")) -> list[str]:
    return [str(base / n / side) for n in nodes]


def _summary_lines(text: str) -> list[str]:
    """The summary without the lines that name where the work ran and the CSV."""
    return [x for x in text.splitlines()
            if not x.lstrip().startswith(("per-pair work:", "All rows:"))]


def test_cluster_compare_is_the_local_compare_and_runs_where_the_data_is(cluster, tmp_path):
    base = cluster["base"]
    args = ["compare", "-gp", *_dirs(base, "golden"), "-tp", *_dirs(base, "target")]
    rc_local, out_local = run_cli(*args, "-j", "1", "-o", str(tmp_path / "local.csv"))
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", *args, "--scheduler",
                        cluster["addr"], "-o", str(tmp_path / "cluster.csv")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == rc_local == 1, r.stderr  # the injected divergence fails
    assert (tmp_path / "cluster.csv").read_text() == (tmp_path / "local.csv").read_text()
    assert _summary_lines(r.stdout) == _summary_lines(out_local)
    assert "FIRST DIVERGENT op" in r.stdout and "3_Layer/1_Linear" in r.stdout
    assert f"Dask cluster {cluster['addr']}" in r.stdout
    rows = pl.read_csv(tmp_path / "cluster.csv")
    assert set(rows.get_column("verdict")) >= {"pass", "fail"}
    assert rows.filter(pl.col("mode") == "tensor").height == 2 * N_TENSORS

    # Placement: each rank's pairs ran on the worker of the node holding both files.
    res = compare_dumps(open_dumps(_dirs(base, "golden")), open_dumps(_dirs(base, "target")),
                        scheduler=cluster["addr"])
    assert res.engine.moved_bytes == 0 and len(res.engine.placement) == 2 * N_TENSORS
    for (g, t), worker in res.engine.placement.items():
        node = "nodeA" if g.startswith(str(base / "nodeA")) else "nodeB"
        assert t.startswith(str(base / node)) and worker == cluster["workers"][node]


def test_pair_no_worker_can_read_travels_to_the_golden_worker(cluster):
    """Golden on node A, target on node B: A receives B's chunks; same result."""
    base = cluster["base"]
    g, t = open_dumps([str(base / "nodeA" / "golden")]), open_dumps([str(base / "nodeB" /
                                                                          "target")])
    local = compare_dumps(g, t)
    res = compare_dumps(g, t, scheduler=cluster["addr"])
    assert res.rows.equals(local.rows)
    assert res.engine.moved_pairs == N_TENSORS
    target_bytes = sum(os.path.getsize(p) for p in res.rows.get_column("target_path"))
    assert 2 * BIG <= res.engine.moved_bytes < target_bytes  # payloads only, headers stay
    assert set(res.engine.placement.values()) == {cluster["workers"]["nodeA"]}
    assert "bytes of target chunks travelled" in res.engine.summary()


def test_killed_worker_never_turns_a_pair_into_a_pass(cluster):
    """Node B's worker dies while reading a tensor (a FIFO holds it there): its
    pairs are reported not compared; node A's are computed as locally."""
    base = cluster["base"]
    local = compare_dumps(open_dumps(_dirs(base, "golden")), open_dumps(_dirs(base, "target")))
    fifo_dump = base / "nodeB" / "target_fifo"
    subprocess.run(["cp", "-r", str(base / "nodeB" / "target"), str(fifo_dump)], check=True)
    victim = sorted(fifo_dump.rglob("*.bin"))[3]
    victim.unlink()
    os.mkfifo(victim)
    golden = open_dumps(_dirs(base, "golden"))
    target = open_dumps([str(base / "nodeA" / "target"), str(fifo_dump)])
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(
        res=compare_dumps(golden, target, scheduler=cluster["addr"])))
    th.start()

    def worker_b_inside_the_fifo():
        try:
            return os.open(victim, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody has it open for reading yet
            return None

    fd = _wait(worker_b_inside_the_fifo, "node B's worker to open the FIFO")
    cluster["procs"]["nodeB"].send_signal(signal.SIGKILL)
    cluster["procs"]["nodeB"].wait()
    os.close(fd)
    th.join(timeout=300)
    res = box["res"]
    rank1 = res.rows.filter(pl.col("target_process").str.starts_with("1_"))
    rank0 = res.rows.filter(pl.col("target_process").str.starts_with("0_"))
    tensor1 = rank1.filter(pl.col("mode") == "tensor")
    assert tensor1.height == N_TENSORS
    assert set(tensor1.get_column("verdict")) == {"not-compared"}
    assert all("left the cluster" in x for x in tensor1.get_column("reason"))
    assert res.engine.not_compared == N_TENSORS
    lrank0 = local.rows.filter(pl.col("target_process").str.starts_with("0_"))
    assert rank0.get_column("verdict").to_list() == lrank0.get_column("verdict").to_list()
    assert rank0.select("cosine", "max_abs_err").equals(lrank0.select("cosine", "max_abs_err"))


def test_default_local_cluster_is_the_in_process_compare(tmp_path, monkeypatch):
    """Big enough dumps go to a local cluster of one worker process per core
    (here forced for a small dump): same rows, bit for bit."""
    from msprobe_atb.offline import pair_engine

    for name, dev in (("nodeA", 0), ("nodeB", 1)):
        rank_dump(tmp_path / name / "golden", dev, 100 + dev, np.float32, 1)
        rank_dump(tmp_path / name / "target", dev, 200 + dev, np.float16, 2)
    golden, target = open_dumps(_dirs(tmp_path, "golden")), open_dumps(_dirs(tmp_path, "target"))
    local = compare_dumps(golden, target)
    monkeypatch.setattr(pair_engine, "LOCAL_CLUSTER_MIN_BYTES", 0)
    res = compare_dumps(golden, target, jobs=2)
    assert res.engine.where == "local Dask cluster of 2 worker processes"
    assert len(set(res.engine.placement.values())) == 2
    assert res.rows.equals(local.rows)


def test_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch, capsys):
    from msprobe_atb.offline import dask_run

    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    monkeypatch.setattr(dask_run, "CONNECT_TIMEOUT", "1s")
    rc, out = run_cli("compare", "-gp", str(tmp_path / "g"), "-tp", str(tmp_path / "g"),
                      "--scheduler", "tcp://127.0.0.1:9", "-o", str(tmp_path / "r.csv"))
    assert rc == 2 and not (tmp_path / "r.csv").exists()
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err
