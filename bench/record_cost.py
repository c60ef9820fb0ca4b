"""Record path: the shim's CPU per record of tiny tensors (`task: statistics`) over no probe.

A large model on 8 devices selects ~80k tensors a second per process under
`task: statistics`; each becomes one line of the process's record log (the
target: the record path costs <= 1 us a record beyond the statistics). The
host (native/tests/record_bench.cpp) calls ATB's hooks for ROUNDS executions of
OPS top-level ops, each saving two one-element inputs and two outputs (fp32,
fp16), once with the real shim preloaded and once with no probe (the stand-in
libatb's constant-returns defaults). The difference of the two processes' CPU
time (user + system, from the kernel's rusage, over every thread: the hooks,
the writers, the monitor), divided by the records, is the shim's cost per
record, statistics included (of one element: the call is most of it, ~0.05 us);
the CPU time of the thread that saved the tensors (the host prints it) splits
it into the hooks' share and the shim's threads'. The machine is shared, so CPU
time, not wall, and the median of REPEAT runs taken in turn. The target is the
cost beyond computing the statistics: what the same statistics of the same
one-element tensors cost alone (stats_bench, the shim's own pass) is taken off,
and both figures are printed.
write(2) calls per record (the process's syscw, read from /proc before it is
reaped) show the batching of the record log. No control plane runs: the bench
publishes the config itself and holds daemon.lock."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench.common import REPO, atb_env, probe_env, write_config
from bench.stats_throughput import stats_bench

HOST = REPO / "build" / "probe" / "bin" / "record_bench"
ROUNDS, OPS = 1000, 100  # 4 tensors an op: 400k records a run
REPEAT = 5
TARGET_US = 1.0


def _syscw(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("syscw:"):
            return int(line.split()[1])
    raise RuntimeError(f"no syscw in /proc/{pid}/io")


def _run(env: dict[str, str]) -> tuple[float, int, int, float]:
    """(CPU s, write(2) calls, tensors, CPU s of the thread that saved them)
    of one host run."""
    proc = subprocess.Popen([str(HOST), str(ROUNDS), str(OPS)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    proc.stdout.close()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # a zombie: its /proc/io stays
    writes = _syscw(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    said = dict(re.findall(r"(\w+)=(\d+)", out))
    return (usage.ru_utime + usage.ru_stime, writes, int(said["tensors"]),
            int(said["thread_cpu_ns"]) / 1e9)


def _stats_us(tmp: Path) -> float:
    """The statistics of one record's tensor alone, in us: half the records are
    one fp32 element, half one fp16 element (the median of REPEAT runs each)."""
    per = []
    for code, np_type in ((0, np.float32), (1, np.float16)):
        path = tmp / f"one-{code}.bin"
        a = np.random.default_rng(3).standard_normal(16384).astype(np_type)
        a.tofile(path)
        per.append(statistics.median(stats_bench(str(code), path, a.itemsize, 0.3)["ns"]
                                     for _ in range(REPEAT)))
    return sum(per) / len(per) / 1e3


def _publish(root: Path, config: Path) -> int:
    """Publishes the config into a fresh control block and holds daemon.lock
    (no control plane is started); returns the lock's fd."""
    from msprobe_atb.config.compile import compile_config
    from msprobe_atb.config.schema import validate
    from msprobe_atb.control.block import ControlBlock

    probe = root / ".probe"
    probe.mkdir(parents=True)
    fd = os.open(probe / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with ControlBlock(root, create=True) as block:
        block.publish(compile_config(validate(json.loads(config.read_text()))))
    return fd


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-record-") as tmp:
        out, config = Path(tmp) / "out", Path(tmp) / "config.json"
        write_config(config, task="statistics", dump_enable=True)
        root = out / "atb_dump_data"
        lock = _publish(root, config)
        env = {**probe_env(out, config), "MSPROBE_ATB_ATTACH_WAIT_MS": "0"}
        runs: dict[str, list[tuple[float, int, int, float]]] = {"probe": [], "none": []}
        try:
            for _ in range(REPEAT):
                for name, e in (("probe", env), ("none", atb_env())):
                    runs[name].append(_run(e))
                # each run's log and data/ go: the next run starts on an empty disk's worth
                shutil.rmtree(root / ".probe" / "records", ignore_errors=True)
                shutil.rmtree(root / "data", ignore_errors=True)
        finally:
            os.close(lock)
        stats_us = _stats_us(Path(tmp))
    tensors = runs["probe"][0][2]
    cpu = {name: statistics.median(r[0] for r in rs) for name, rs in runs.items()}
    host = {name: statistics.median(r[3] for r in rs) for name, rs in runs.items()}
    writes = statistics.median(p[1] - n[1] for p, n in zip(runs["probe"], runs["none"]))
    per = (cpu["probe"] - cpu["none"]) / tensors * 1e6
    beyond = per - stats_us
    hooks = (host["probe"] - host["none"]) / tensors * 1e6
    return [
        f"host: record_bench {ROUNDS} rounds x {OPS} ops x 4 one-element tensors (fp32, fp16)"
        f" = {tensors:,} records, task statistics; medians of {REPEAT} runs in turn",
        f"CPU (user+sys, every thread): probe {cpu['probe']:.3f} s, no probe {cpu['none']:.3f} s",
        f"record path: {per:.2f} us of CPU per record over no probe, statistics included"
        f" ({1 / per if per > 0 else float('inf'):.2f} M records/s on one core)",
        f"beyond computing the statistics ({stats_us:.3f} us a record alone: stats_bench on the"
        f" same one-element tensors): {beyond:.2f} us (target <= {TARGET_US} us:"
        f" {'met' if beyond <= TARGET_US else 'NOT met'};"
        f" {1 / beyond if beyond > 0 else float('inf'):.2f} M records/s on one core)",
        f"of which the hooks on the host's thread {hooks:.2f} us (checks, statistics, pending"
        f" counts, the copy into the queue), the shim's threads {per - hooks:.2f} us (writers:"
        " records, their batches, the monitor)",
        f"write(2) calls per record: {writes / tensors:.4f} ({writes:,.0f} over no probe)",
    ]
