"""Dump throughput: the probe writing a big model's tensors vs raw disk writes.

The stand-in runs realistic shapes with --no-compute (hidden 4096, 2k-token
prefill). The probe's figure is payload bytes per second of the time dumping
added to the process's run; the reference is this machine writing the same
bytes, in the same file sizes, with plain os.write from one thread.

The time a dump adds has three parts, each measured by its own run:
- ATB's handover: for every tensor a probe asks for, ATB copies it from the
  device into a fresh host buffer (callsites §6), both stages, whatever the
  probe then keeps. A bench-only probe that asks for the same tensors and
  throws them away (build/test/libhandover_probe_abi1.so) measures it; any
  probe, msProbe's included, pays it.
- the probe's start: attach and waiting for the control plane's first
  publish, once per process (the asleep probe's run measures it);
- the probe's dump work: copy, queue, write, records (what is left).
The whole-run figure counts all three. The probe's own figure is the time
the host's threads spent in the probe's hands (the slot's host_ns: checks,
the copy into the queue, waiting for queue room, the exit drain), which the
probe measures itself, so it holds on a busy machine too; the wall-clock
remainder (whole run minus handover minus start) is printed beside it.
Wall times on a shared machine are noisy, so each
side is the median of 3 interleaved runs, and the CPU time and minor page
faults the probe adds (from the kernel's rusage of each run) are printed
too: they do not depend on what else the machine is doing."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ABI, ATBSIM, REPO, atb_env, probe_env, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

WORKLOAD = ["--no-compute", "--layers", "2", "--hidden", "4096", "--heads", "32",
            "--vocab", "32000", "--prompt-len", "2048", "--decode-steps", "1"]
REPEAT = 3
HANDOVER_PROBE = REPO / "build" / "test" / f"libhandover_probe_abi{ABI}.so"


@dataclass
class Run:
    wall: float    # seconds
    cpu: float     # user + system seconds of the process
    faults: int    # minor page faults of the process
    rss: int       # peak RSS of the process, KiB


def _run(env: dict[str, str]) -> Run:
    """One `atbsim run WORKLOAD`, with its own rusage (os.wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(ATBSIM), "run", *WORKLOAD], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_minflt, usage.ru_maxrss)


def _median(runs: list[Run]) -> Run:
    return Run(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs),
               int(statistics.median(r.faults for r in runs)),
               int(statistics.median(r.rss for r in runs)))


def _raw_write(sizes: list[int], where: Path) -> float:
    payload = b"\x5a" * max(sizes)
    start = time.perf_counter()
    for i, size in enumerate(sizes):
        fd = os.open(where / f"t{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
        try:
            os.write(fd, memoryview(payload)[:size])
        finally:
            os.close(fd)
    return time.perf_counter() - start


def _handover() -> Run:
    """ATB handing the dumped op's tensors to a probe that drops them."""
    env = atb_env()
    env["LD_PRELOAD"] = str(HANDOVER_PROBE)
    env["HANDOVER_OP_ID"] = "1"
    return _run(env)


@dataclass
class Dump:
    run: Run
    written: int      # payload bytes the probe wrote
    sizes: list[int]  # file sizes of the .bin files
    drops: int
    host_s: float     # the host's time in the probe's hands


def _dump(policy: str, task: str = "tensor", enable: bool = True) -> Dump:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp).resolve(), Path(tmp).resolve() / "config.json"
        write_config(cfg, dump_enable=enable, task=task, ids="1", save_child=False,
                     queue_full_policy=policy, queue_budget_mb=256)
        run = _run(probe_env(out, cfg))
        with ControlBlock(dump_root_of(out)) as block:
            proc = max(block.procs(), key=lambda p: p.start_ns)
        sizes = [p.stat().st_size for p in (out / "atb_dump_data" / "data").rglob("*.bin")]
        stop_daemon(out)
        return Dump(run, proc.bytes_written, sizes, proc.drops, proc.host_ns / 1e9)


def _added(run: Run, ref: Run) -> Run:
    return Run(run.wall - ref.wall, run.cpu - ref.cpu, run.faults - ref.faults, 0)


def run() -> list[str]:
    runs: dict[str, list[Run]] = {"base": [], "handover": [], "asleep": [], "probe": []}
    host_s: list[float] = []
    for _ in range(REPEAT):  # interleaved, so a slow spell hits every side
        runs["base"].append(_run(atb_env()))
        runs["handover"].append(_handover())
        runs["asleep"].append(_dump("block", enable=False).run)
        dump = _dump("block")
        runs["probe"].append(dump.run)
        host_s.append(dump.host_s)
    base, handover, asleep, probe = (_median(runs[k]) for k in runs)
    host = statistics.median(host_s)
    whole = _added(probe, base)
    atb = _added(handover, base)
    start = _added(asleep, base)
    rest = Run(whole.wall - atb.wall - start.wall, whole.cpu - atb.cpu - start.cpu,
               whole.faults - atb.faults - start.faults, 0)
    raw_runs = []
    for _ in range(REPEAT):
        with tempfile.TemporaryDirectory(prefix="msprobe-bench-raw-") as tmp:
            raw_runs.append(_raw_write(dump.sizes, Path(tmp)))
    raw = statistics.median(raw_runs)
    drop = _dump("drop")
    stats_run = _dump("block", task="statistics").run
    stats_rss = (stats_run.rss - base.rss) / 1024
    mib = dump.written / 2**20
    return [
        f"workload: atbsim run {' '.join(WORKLOAD)}, dumping layer 1 (task tensor),"
        f" 256 MiB queue budget; medians of {REPEAT} interleaved runs",
        f"runs: {base.wall:.2f} s without a probe, {handover.wall:.2f} s with ATB's handover"
        f" only, {asleep.wall:.2f} s with the probe asleep, {probe.wall:.2f} s dumping"
        f" {mib:.0f} MiB in {len(dump.sizes)} files",
        f"raw os.write of the same files (median of {REPEAT}): {raw:.2f} s ->"
        f" {mib / raw:.0f} MiB/s",
        f"probe's own cost to the host: {host:.3f} s in the probe's hands (copy, queue room,"
        f" exit drain) -> {mib / max(host, 1e-3):.0f} MiB/s; probe/raw throughput ratio"
        f" {raw / max(host, 1e-3):.2f} (target >= 0.8)",
        f"  wall-clock remainder (whole run - handover - start): {rest.wall:.2f} s,"
        f" {rest.cpu:.2f} CPU s on all threads (the writer's write(2)s included),"
        f" {rest.faults} minor page faults ({rest.faults * 4096 / dump.written:.2f} per 4 KiB)",
        f"whole run vs no probe: {whole.wall:.2f} s added -> {mib / whole.wall:.0f} MiB/s,"
        f" ratio {raw / whole.wall:.2f}: ATB's handover {atb.wall:.2f} s ({atb.cpu:.2f} CPU s,"
        f" {atb.faults} minor faults: the D2H copies into fresh host buffers, both stages),"
        f" the probe's start {start.wall:.2f} s",
        f"drop policy, 256 MiB budget: ran {drop.run.wall:.2f} s, wrote"
        f" {drop.written / 2**20:.0f} MiB, dropped {drop.drops} tensors (counted, reported in"
        f" status)",
        f"task statistics, same run: peak RSS {stats_run.rss / 1024:.0f} MiB vs"
        f" {base.rss / 1024:.0f} MiB without the probe: {stats_rss:+.0f} MiB (target <= +64 MiB)",
    ]
