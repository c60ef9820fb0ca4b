"""Cost of the preloaded probe on a running model: none vs asleep vs awake-but-idle.

The stand-in runs with --no-compute, so the time is almost all ATB runtime and
hook traffic: the worst case for the probe's relative overhead. Each variant
runs a short and a long workload; the difference isolates the per-op cost
from once-per-process and once-per-op-object work (attach, graph reports).
Wall time on a shared machine is noisy, so instructions are also counted
with callgrind, which is exact whatever else the machine does."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    ATBSIM,
    REPO,
    atb_env,
    probe_env,
    run_atbsim,
    stop_daemon,
    write_config,
)
from msprobe_atb.control.block import ControlBlock, dump_root_of

BASE = ["--no-compute", "--layers", "16", "--hidden", "64", "--decode-steps", "32"]
SHORT, LONG = ["--requests", "2"], ["--requests", "12"]
# callgrind counts exactly, so a shorter long run gives the same slope in less time
# (the requests are identical: runner setups grow linearly with them)
CG_LONG = ["--requests", "6"]
REPEAT = 5


def _ops_per_run(output: Path) -> int:
    with ControlBlock(dump_root_of(output)) as block:
        return max(block.procs(), key=lambda p: p.start_ns).ops_seen


def _run_cpu(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, the stand-in process's own user+sys CPU s) of one `atbsim run ARGS`."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(ATBSIM), "run", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"atbsim run {' '.join(args)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def _measure(env: dict[str, str], output: Path | None) -> dict[str, float]:
    """Medians of REPEAT short and long runs' wall and CPU ("short", "long",
    "short_cpu", "long_cpu"), and "ops": the long run's extra runner setups."""
    got = {}
    for name, args in (("short", SHORT), ("long", LONG)):
        runs = [_run_cpu(BASE + args, env) for _ in range(REPEAT)]
        got[name] = statistics.median(w for w, _ in runs)
        got[f"{name}_cpu"] = statistics.median(c for _, c in runs)
        got[f"{name}_ops"] = _ops_per_run(output) if output else 0
    got["ops"] = got.pop("long_ops") - got.pop("short_ops")
    return got


def _instructions(env: dict[str, str], tmp: Path, args: list[str]) -> int:
    """Instructions one run executes, counted by callgrind."""
    return _callgrind([str(ATBSIM), "run", *BASE, *args], env, tmp)


HOOK_LOOP = REPO / "build" / "probe" / "bin" / "hook_loop"
LOOP_SHORT, LOOP_LONG = 1000, 11000


def _callgrind(cmd: list[str], env: dict[str, str], tmp: Path) -> int:
    out = tmp / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = re.search(r"^summary:\s+(\d+)", out.read_text(), re.M)
    if not summary:
        raise RuntimeError(f"no instruction summary in {out}")
    return int(summary.group(1))


def _hook_loop_per_op(env: dict[str, str], tmp: Path) -> float:
    """Instructions per op of ATB's per-op hook sequence (15 calls, and the 7
    IsSaveTensorInSpecificDir where the exec range holds: native/tests/hook_loop.cpp):
    the slope between a short and a long loop."""
    short, long = (_callgrind([str(HOOK_LOOP), str(n)], env, tmp) for n in (LOOP_SHORT, LOOP_LONG))
    return (long - short) / (LOOP_LONG - LOOP_SHORT)


LOOP_WALL_OPS = 10_000_000


def _loop_seconds(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(HOOK_LOOP), str(LOOP_WALL_OPS)], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _hook_loop_wall(env: dict[str, str]) -> tuple[float, float]:
    """Wall ns per op of the hook loop under env and under ATB's defaults,
    best of REPEAT runs taken in turn: what the instruction counts cost in time
    (an indirect jump is one instruction but not the cheapest one)."""
    best = {"probe": float("inf"), "defaults": float("inf")}
    for _ in range(REPEAT):
        for name, e in (("probe", env), ("defaults", atb_env())):
            best[name] = min(best[name], _loop_seconds(e))
    return best["probe"] / LOOP_WALL_OPS * 1e9, best["defaults"] / LOOP_WALL_OPS * 1e9


# The hook loop's targets: asleep as cheap as ATB's defaults allow, awake-idle
# no dearer than asleep; awake with filters that select another op, where ATB
# also asks IsSaveTensorInSpecificDir 7 times an op.
IDS_OTHER = "probe, awake, ids selecting another op (ids 2)"
NAME_OTHER = "probe, awake, op_name selecting another op (op_name lmhead)"
LOOP_TARGETS = {"probe, no config": 150, "probe, dump_enable false": 150,
                "probe, awake-idle (exec_range none)": 160, IDS_OTHER: 300, NAME_OTHER: 300}


def _target(name: str, value: float) -> str:
    if name not in LOOP_TARGETS:
        return ")"
    target = LOOP_TARGETS[name]
    return f"; target <= {target}: {'met' if value <= target else 'NOT met'})"


def _hook_loop_lines(per_op: dict[str, float],
                     wall: dict[str, tuple[float, float]]) -> list[str]:
    """The hook loop's figures against ATB's own constant-returns defaults (no
    probe preloaded); awake-idle is exec_range "none", which selects nothing;
    the loop's op is op 1, 1_LinearOperation, which `ids: "2"` cannot select (it
    still counts its model's executions, and is told to build no directories:
    ATB asks about its runners' names) and `op_name: "lmhead"` cannot either
    (ATB asks about its directories)."""
    ref = per_op["constant-returns defaults"]
    return [f"hook loop, instructions per op (15 hook calls, +7 where the exec range holds;"
            f" callgrind): {name} {v:.0f} (ratio {v / ref:.2f} vs the constant-returns defaults"
            + _target(name, v)
            for name, v in per_op.items()] + [
        f"hook loop, wall per op (best of {REPEAT} in turn with the defaults,"
        f" {LOOP_WALL_OPS:,} ops): {name} {probe:.1f} ns, defaults {ref_ns:.1f} ns"
        f" ({probe - ref_ns:+.1f} ns)"
        for name, (probe, ref_ns) in wall.items()]


def _instruction_lines(env: dict[str, str], tmp: Path, ops: int) -> list[str]:
    """Per-runner-setup instructions of the asleep probe, as the slope between
    the short and the long run, for a single-threaded host and a multi-threaded
    one (--async, as ATB_OPERATION_EXECUTE_ASYNC). The shim's threads cost a
    single-threaded host glibc malloc's single-thread fast path; real ATB hosts
    are multi-threaded anyway."""
    if not shutil.which("valgrind"):
        return ["instructions: valgrind not found, skipped"]
    lines = []
    for mode, extra in (("single-threaded host", []), ("async host", ["--async"])):
        slope = {}
        cg_ops = ops * (int(CG_LONG[1]) - int(SHORT[1])) / (int(LONG[1]) - int(SHORT[1]))
        for name, e in (("without", atb_env()), ("asleep", env)):
            short, long = (_instructions(e, tmp, r + extra) for r in (SHORT, CG_LONG))
            slope[name] = (long - short) / cg_ops
        added = slope["asleep"] - slope["without"]
        lines.append(f"instructions per runner setup ({mode}, callgrind): "
                     f"{slope['without']:.0f} without the probe, {slope['asleep']:.0f} with it"
                     f" asleep: {added:+.0f} ({added / slope['without']:+.2%}; target <= +0.5%)")
    return lines


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp), Path(tmp) / "config.json"
        base = _measure(atb_env(), None)
        write_config(cfg, dump_enable=False)
        env = probe_env(out, cfg)
        run_atbsim(BASE + SHORT, env)  # starts the daemon
        # the per-setup slopes without the exit's wait for the control plane's
        # build: once per process, it varies by tens of ms with the daemon's timing
        slope_env = {**env, "MSPROBE_ATB_EXIT_BUILD_MS": "0"}
        asleep = _measure(slope_env, out)
        ops = asleep["ops"]
        once = {"with": statistics.median(run_atbsim(BASE + SHORT, env) for _ in range(REPEAT)),
                "without": asleep["short"]}
        loop = shutil.which("valgrind") is not None
        per_op, wall = {}, {}
        if loop:
            no_config = {k: v for k, v in env.items() if k != "ATB_DUMP_CONFIG"}
            for name, e in (("constant-returns defaults", atb_env()),
                            ("probe, no config", no_config),
                            ("probe, dump_enable false", env)):
                per_op[name] = _hook_loop_per_op(e, out)
            wall["probe, dump_enable false"] = _hook_loop_wall(env)
        instruction_lines = _instruction_lines(env, out, ops)
        write_config(cfg, dump_enable=True, exec_range="none")
        run_atbsim(BASE + SHORT, env)
        if loop:
            per_op["probe, awake-idle (exec_range none)"] = _hook_loop_per_op(env, out)
            wall["probe, awake-idle"] = _hook_loop_wall(env)
        idle = _measure(slope_env, out)
        if loop:
            write_config(cfg, dump_enable=True, ids="2")
            run_atbsim(BASE + SHORT, env)
            per_op[IDS_OTHER] = _hook_loop_per_op(env, out)
            wall["probe, awake, ids 2"] = _hook_loop_wall(env)
            write_config(cfg, dump_enable=True, op_name="lmhead")
            run_atbsim(BASE + SHORT, env)
            per_op[NAME_OTHER] = _hook_loop_per_op(env, out)
            write_config(cfg, dump_enable=True, ids="2", exec_range="0,0")
            run_atbsim(BASE + SHORT, env)
            per_op["probe, awake, ids 2 and exec_range 0,0 (the loop's rounds 1.. past it)"] = \
                _hook_loop_per_op(env, out)
            instruction_lines[:0] = _hook_loop_lines(per_op, wall)
        else:
            instruction_lines[:0] = ["hook loop: valgrind not found, skipped"]
        stop_daemon(out)

    def per_op(m: dict[str, float], key: str = "") -> float:
        return ((m[f"long{key}"] - m[f"short{key}"]) - (base[f"long{key}"] - base[f"short{key}"])) \
            / ops * 1e9

    def runs(m: dict[str, float]) -> str:
        return (f"short {m['short'] * 1e3:7.1f} ms   long {m['long'] * 1e3:7.1f} ms"
                f" (CPU {m['short_cpu'] * 1e3:.1f}, {m['long_cpu'] * 1e3:.1f} ms)")

    return [
        f"workload: atbsim run {' '.join(BASE)} with {' '.join(SHORT)} and {' '.join(LONG)}"
        f" ({ops} more runner setups in the long run); medians of {REPEAT};"
        " with the probe, MSPROBE_ATB_EXIT_BUILD_MS=0 (the exit's wait is once per process)",
        f"no probe:      {runs(base)}",
        f"probe asleep:  {runs(asleep)}   long-run ratio {asleep['long'] / base['long']:.3f}",
        f"probe awake, exec_range none: {runs(idle)}   long-run ratio"
        f" {idle['long'] / base['long']:.3f}",
        f"per runner setup, with its execute's hooks: wall asleep {per_op(asleep):+.0f} ns,"
        f" awake-idle {per_op(idle):+.0f} ns; the stand-in's own CPU asleep"
        f" {per_op(asleep, '_cpu'):+.0f} ns, awake-idle {per_op(idle, '_cpu'):+.0f} ns"
        f" (the stand-in's own: {(base['long'] - base['short']) / ops * 1e9:.0f} ns)",
        f"once per process, asleep: the short run takes {once['with'] * 1e3:.1f} ms with the"
        f" exit's wait for the control plane's build of its files (default"
        f" MSPROBE_ATB_EXIT_BUILD_MS), {once['without'] * 1e3:.1f} ms without it,"
        f" {base['short'] * 1e3:.1f} ms without the probe",
        *instruction_lines,
    ]
