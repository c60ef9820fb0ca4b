"""compare on a real Dask cluster: a `dask scheduler` and two `dask worker`
processes on 127.0.0.1, each given only its own node's dump root (two
simulated nodes holding different ranks, golden and target)."""

from __future__ import annotations

import contextlib
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
from msprobe_atb.offline.read.dumpset import open_dumps
from msprobe_atb.offline.read.metrics import CHUNK

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

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


@contextlib.contextmanager
def dask_cluster(base: Path, roots: dict[str, list[Path]]):
    """A `dask scheduler` and one `dask worker` per name, announcing its roots."""
    sched_file = base / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = {"scheduler": subprocess.Popen(
        [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(sched_file)], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)}
    try:
        addr = _wait(lambda: sched_file.is_file() and sched_file.stat().st_size and
                     json.loads(sched_file.read_text())["address"], "the scheduler")
        for name, dirs in roots.items():
            procs[name] = subprocess.Popen(
                [str(DASK), "worker", addr, "--name", name, "--nthreads", "1", "--no-nanny",
                 "--no-dashboard", "--host", "127.0.0.1",
                 "--preload", HOLD_PRELOAD, "--preload", "msprobe_atb.offline.dask_roots",
                 *[a for d in dirs for a in ("--dump-root", str(d))]],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        from distributed import Client
        with Client(addr, timeout=WAIT_S) as c:
            c.wait_for_workers(len(roots), timeout=WAIT_S)
            names = {w["name"]: a for a, w in c.scheduler_info()["workers"].items()}
        yield {"base": base, "addr": addr, "workers": names, "procs": procs}
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("dask")
    nodes = {"nodeA": 0, "nodeB": 1}
    for name, dev in nodes.items():
        rank_dump(base / name / "golden", dev, 100 + dev, np.float32, 1)
        rank_dump(base / name / "target", dev, 200 + dev, np.float16, 2)
    with dask_cluster(base, {name: [base / name] for name in nodes}) as c:
        yield c


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


HOLD_PRELOAD = str(Path(__file__).with_name("dask_hold.py"))


def hold_before(dump: Path, k: int) -> tuple[Path, Path]:
    """A FIFO beside the k-th .bin file of `dump` that a worker (dask_hold.py) reads
    to its end before it opens that file: it blocks there until the test writes,
    closes it, or kills the worker. (FIFO, the .bin file)."""
    victim = sorted(dump.rglob("*.bin"))[k]
    hold = victim.with_name(victim.name + ".hold")
    os.mkfifo(hold)
    return hold, victim


def fifo_opened(fifo: Path) -> int | None:
    """A writer fd once a reader has the FIFO open (it then blocks in read)."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: nobody has it open for reading yet
        return None


def holds_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fds / fd) == str(path) for fd in os.listdir(fds))
    except OSError:  # an fd closed while we looked
        return False


def compare_in_thread(golden, target, addr: str) -> tuple[threading.Thread, dict]:
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(
        res=compare_dumps(golden, target, scheduler=addr)))
    th.start()
    return th, box


def test_killed_worker_never_turns_a_pair_into_a_pass(cluster):
    """Node B's worker dies while reading a tensor (a FIFO holds it there): no
    other worker reads node B's disk, so its pairs are reported not compared;
    node A's are computed as locally."""
    base = cluster["base"]
    local = compare_dumps(open_dumps(_dirs(base, "golden")), open_dumps(_dirs(base, "target")))
    fifo_dump = base / "nodeB" / "target_fifo"
    subprocess.run(["cp", "-r", str(base / "nodeB" / "target"), str(fifo_dump)], check=True)
    hold, _ = hold_before(fifo_dump, 3)
    golden = open_dumps(_dirs(base, "golden"))
    target = open_dumps([str(base / "nodeA" / "target"), str(fifo_dump)])
    th, box = compare_in_thread(golden, target, cluster["addr"])
    fd = _wait(lambda: fifo_opened(hold), "node B's worker to open the FIFO")
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


def test_killed_worker_s_pairs_are_retried_on_another_that_can_read_them(tmp_path):
    """Both workers read the shared storage holding both dumps. The one blocked
    on a target tensor (a FIFO holds it there) is killed; Dask retries its batch on
    the other worker, which reads the file: every pair compared, as in the local run."""
    shared = tmp_path / "shared"
    rank_dump(shared / "golden", 0, 100, np.float32, 1)
    rank_dump(shared / "target", 0, 200, np.float16, 2)
    golden, target = open_dumps([str(shared / "golden")]), open_dumps([str(shared / "target")])
    local = compare_dumps(golden, target)
    hold, victim = hold_before(shared / "target", 5)
    with dask_cluster(tmp_path, {"w1": [shared], "w2": [shared]}) as c:
        th, box = compare_in_thread(golden, target, c["addr"])
        fd = _wait(lambda: fifo_opened(hold), "a worker to open the FIFO")
        stuck = _wait(lambda: next((n for n in ("w1", "w2")
                                    if holds_open(c["procs"][n].pid, hold)), None),
                      "the worker reading the FIFO")
        hold.unlink()  # the retry opens the file at once
        c["procs"][stuck].send_signal(signal.SIGKILL)
        c["procs"][stuck].wait()
        os.close(fd)
        th.join(timeout=300)
    res = box["res"]
    assert res.engine.not_compared == 0
    assert res.rows.equals(local.rows)
    assert set(res.rows.get_column("verdict")) >= {"pass", "fail"}
    other = c["workers"]["w2" if stuck == "w1" else "w1"]
    retried = [w for (_, t), w in res.engine.placement.items() if t == str(victim)]
    assert retried == [other]


def test_local_cluster_is_the_in_process_compare(tmp_path):
    """--engine local-cluster: a local cluster of one worker process per core
    computes every pair; same rows, bit for bit."""
    golden, target = _two_rank_dumps(tmp_path)
    local = compare_dumps(golden, target, engine="in-process")
    assert local.engine.where == "in-process" and local.engine.in_process > 0
    res = compare_dumps(golden, target, jobs=2, engine="local-cluster")
    assert res.engine.where == "local Dask cluster of 2 worker processes"
    assert len(set(res.engine.placement.values())) == 2 and res.engine.in_process == 0
    assert len(res.engine.placement) == local.engine.in_process
    assert res.rows.equals(local.rows)


def test_auto_works_in_process_while_the_cluster_starts(tmp_path, monkeypatch):
    """auto, over the threshold (here lowered to 0): the first pair runs here,
    the cluster starts meanwhile (the progress callback waits for it), the rest
    run on its workers; the rows are the in-process ones, the summary says so."""
    from msprobe_atb.offline.compare import dask_run, pair_engine

    golden, target = _two_rank_dumps(tmp_path)
    local = compare_dumps(golden, target, jobs=2)
    assert local.engine.where == "in-process"
    assert "under the 5 s from which a local Dask cluster is started" in local.engine.why
    starts: list = []

    class Seen(dask_run.ClusterStart):
        def __init__(self, jobs: int) -> None:
            super().__init__(jobs)
            starts.append(self)

    monkeypatch.setattr(dask_run, "ClusterStart", Seen)
    monkeypatch.setattr(pair_engine, "LOCAL_CLUSTER_MIN_S", 0.0)
    res = compare_dumps(golden, target, jobs=2, progress=lambda n: starts[0].ready.wait())
    assert res.rows.equals(local.rows)
    e = res.engine
    assert e.where == "local Dask cluster of 2 worker processes" and e.workers == 2
    assert e.in_process <= 1 and e.in_process + len(e.placement) == local.engine.in_process
    assert "over the 0 s from which a local Dask cluster is started" in e.summary()
    assert e.as_dict()["pairs_on_cluster"] == len(e.placement)


def test_auto_compares_in_process_when_the_cluster_cannot_start(tmp_path):
    """A script fed to `python -` has no main file for the workers' forkserver to
    load, so the local cluster fails to start: auto computes every pair here."""
    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    rank_dump(tmp_path / "t", 0, 200, np.float16, 2, big=False)
    script = f"""
import json
from msprobe_atb.offline import compare_dumps, open_dump
from msprobe_atb.offline.compare import dask_run, pair_engine
pair_engine.LOCAL_CLUSTER_MIN_S = 0.0
starts = []
class Seen(dask_run.ClusterStart):
    def __init__(self, jobs):
        super().__init__(jobs)
        starts.append(self)
dask_run.ClusterStart = Seen
g, t = open_dump({str(tmp_path / "g")!r}), open_dump({str(tmp_path / "t")!r})
res = compare_dumps(g, t, jobs=2, progress=lambda n: starts[0].ready.wait())
local = compare_dumps(g, t, engine="in-process")
print(json.dumps([res.rows.equals(local.rows), res.engine.as_dict()]))
"""
    r = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    same, engine = json.loads(r.stdout.splitlines()[-1])
    assert same and engine["where"] == "in-process" and engine["pairs_in_process"] == 24
    assert "it did not start (RuntimeError(" in engine["why"]


def test_cli_says_which_engine_ran(tmp_path, capsys):
    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    rank_dump(tmp_path / "t", 0, 200, np.float16, 2, big=False)
    args = ["compare", "-gp", str(tmp_path / "g"), "-tp", str(tmp_path / "t"),
            "-o", str(tmp_path / "r.csv")]
    rc, out = run_cli(*args, "-j", "2")
    assert rc == 1 and "per-pair work: in-process [about 0" in out
    assert "under the 5 s from which a local Dask cluster is started]" in out
    rc, out = run_cli(*args, "--engine", "in-process", "--json")
    engine = json.loads(out)["engine"]
    assert rc == 1 and engine["where"] == "in-process" and engine["why"] == "--engine in-process"
    assert engine["pairs_in_process"] == N_TENSORS - 1 and engine["pairs_on_cluster"] == 0
    rc, _ = run_cli(*args, "--engine", "local-cluster", "--scheduler", "tcp://127.0.0.1:9")
    assert rc == 2 and "drop one of the two" in capsys.readouterr().err


def _two_rank_dumps(base: Path):
    for name, dev in (("nodeA", 0), ("nodeB", 1)):
        rank_dump(base / name / "golden", dev, 100 + dev, np.float32, 1)
        rank_dump(base / name / "target", dev, 200 + dev, np.float16, 2)
    return open_dumps(_dirs(base, "golden")), open_dumps(_dirs(base, "target"))


def test_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    rank_dump(tmp_path / "g", 0, 100, np.float32, 1, big=False)
    rc, out = run_cli("compare", "-gp", str(tmp_path / "g"), "-tp", str(tmp_path / "g"),
                      "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1",
                      "-o", str(tmp_path / "r.csv"))
    assert rc == 2 and not (tmp_path / "r.csv").exists()
    assert ("--scheduler tcp://127.0.0.1:9: cannot reach a Dask scheduler there"
            in capsys.readouterr().err)


def test_default_workers_are_one_per_core_this_process_may_use():
    """-j defaults to one worker per core of the process's CPU affinity (what a
    container or taskset allows), not to a fixed cap."""
    code = ("import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from msprobe_atb.offline.read.cores import default_jobs; "
            "print(default_jobs())")
    pinned = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert pinned == "1"
    from msprobe_atb.offline.read.cores import default_jobs
    assert default_jobs() == len(os.sched_getaffinity(0))
