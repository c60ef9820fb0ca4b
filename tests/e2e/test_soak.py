"""A soak at small scale: the load generator (native/tests/loadgen) under
the real shim and the control-plane daemon it starts, 2 devices paced through
many rounds of `task: statistics`, `save_child: true`. Four times a second the
daemon's RSS and the lag (records the shims appended, per their control-block
slots, against the records in the derived files, per .probe/built.json) are
read. The daemon's memory must not grow with the records it builds; once the
load stops, `wait` succeeds with the lag at 0, nothing is lost, and the derived
files equal a `rebuild` of the record logs.

No assertion on time: the machine is shared. The memory bound is on a robust
slope of RSS against records built (the median of the pairwise slopes, so a
transient peak, a manifest merge or the last flush, does not count) times the
records built over the steady part of the run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pytest
from testkit import (
    BUILD,
    REPO,
    derived_files,
    manifest_rows,
    round_counts,
    scratch_dir,
    shim_lib,
)

from msprobe_atb.control.block import ControlBlock
from msprobe_atb.control.liveness import pid_alive
from msprobe_atb.tree import progress
from msprobe_atb.tree.records import list_logs

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

ABI = 1
LOADGEN = BUILD / "probe" / "bin" / f"loadgen_abi{ABI}"
SECONDS = 20  # of load: ~2 x 1000 rounds, ~300k records at this pace
RATE = 8000  # records/s offered per device: within a fraction of a core of the control plane
SAMPLE_S = 0.25
# Growth allowed over the steady part of the run (~200k records): a leak of ~80
# bytes a record built exceeds it (a leaking daemon once grew ~200); without
# one, the daemon's RSS swings by ~20 MiB around a flat line.
RSS_SLACK_KIB = 16 << 10
RSS_SLACK_SHARE = 0.10  # ... or this share of its RSS, if more


@pytest.fixture
def scratch(tmp_path):
    """Where the run writes its tens of thousands of small files (an op_param.json
    per op and round)."""
    yield from scratch_dir(tmp_path / "fs", 2 << 20)


@dataclass(frozen=True)
class Sample:
    made: int  # records the shims appended (their slots' `records`)
    built: int  # records in the derived files (built.json `records`)
    rss_kib: int  # the daemon's VmRSS


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def _look(root: Path) -> tuple[int, Sample] | None:
    """(the daemon's pid, a Sample); None before the block or the daemon is there."""
    try:
        with ControlBlock(root, create=False) as block:
            made = sum(s.records for s in block.procs())
            pid = block.daemon_pid
    except Exception:  # not created yet, or caught mid-creation
        return None
    built = progress.read(root)
    if not pid or built is None:
        return None
    return pid, Sample(made, sum(built.records.values()), _rss_kib(pid))


def _growth_kib(samples: list[Sample]) -> tuple[float, list[Sample]]:
    """The daemon's RSS growth over the steady part of the run (the last two
    thirds of the samples: the first holds start-up, the imports of the manifest
    writer and the allocators' first growth): the median pairwise slope of RSS
    against records built, times the records built over that part."""
    steady = [s for s in samples[len(samples) // 3:] if s.rss_kib]
    slopes = [(b.rss_kib - a.rss_kib) / (b.built - a.built)
              for a, b in combinations(steady, 2) if b.built != a.built]
    if not slopes:
        return 0.0, steady
    return statistics.median(slopes) * (steady[-1].built - steady[0].built), steady


def _devices(stdout: str) -> dict[str, dict[str, str]]:
    """The load generator's line per device ("device=0 pid=... saved=..."), by pid."""
    lines = [dict(kv.split("=", 1) for kv in line.split()) for line in stdout.splitlines()
             if line.startswith("device=")]
    return {d["pid"]: d for d in lines}


def _msprobe(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def _stop_daemon(out: Path, root: Path) -> None:
    """`daemon --stop`, as unload_atb_probe.sh does, and the daemon's exit waited
    for (its last flush is in the files compared); whatever state the run ended
    in, no daemon of it stays behind."""
    try:
        with ControlBlock(root, create=False) as block:
            pid = block.daemon_pid
    except Exception:  # no block: nothing was started
        return
    _msprobe("daemon", "--stop", "--output", str(out), timeout=60)
    deadline = time.monotonic() + 60
    while pid and pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid and pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def _rebuilt_copy(root: Path, dest: Path) -> Path:
    """A rebuild, by the CLI, of a copy of the dump's record logs alone."""
    copy = dest / "atb_dump_data"
    shutil.copytree(root / ".probe" / "records", copy / ".probe" / "records")
    r = _msprobe("rebuild", str(dest))
    assert r.returncode == 0, r.stderr
    return copy


def test_soak_daemon_keeps_pace_in_flat_memory(scratch, clean_env):
    if not LOADGEN.exists() or not shim_lib(ABI).exists():
        pytest.skip("not built yet (make native-test)")
    out = scratch / "out"
    out.mkdir()
    root = out / "atb_dump_data"
    config = scratch / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_enable": True,
                                  "exec_range": "all", "save_child": True}))
    env = dict(clean_env, LD_PRELOAD=str(shim_lib(ABI)), ATB_OUTPUT_DIR=str(out),
               ATB_DUMP_CONFIG=str(config))
    samples: list[Sample] = []
    daemons: set[int] = set()
    gen = subprocess.Popen([str(LOADGEN), "--procs", "2", "--seconds", str(SECONDS), "--tiny",
                            "--layers", "2", "--decode-steps", "3", "--rate", str(RATE)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tick = time.monotonic()
        while gen.poll() is None:
            looked = _look(root)
            if looked:
                daemons.add(looked[0])
                samples.append(looked[1])
            tick += SAMPLE_S
            time.sleep(max(0.0, tick - time.monotonic()))
        stdout, stderr = gen.communicate(timeout=60)
        assert gen.returncode == 0, stderr[-2000:]
        w = _msprobe("wait", str(out), "--timeout", "120")
        assert w.returncode == 0, w.stdout + w.stderr  # complete, nothing lost
        pid, end = _look(root)
        daemons.add(pid)
        logs = {log.name: log.stat().st_size for _, log in list_logs(root)}
        built = progress.read(root)
    finally:
        if gen.poll() is None:
            gen.kill()
            gen.wait()
        _stop_daemon(out, root)

    # one daemon served the whole run, and its memory did not grow with the records
    assert len(daemons) == 1, f"the daemon was replaced during the run: {sorted(daemons)}"
    assert len(samples) >= SECONDS / SAMPLE_S / 2, f"too few samples of the daemon: {samples}"
    growth, steady = _growth_kib(samples)
    allowed = max(RSS_SLACK_KIB, RSS_SLACK_SHARE * statistics.median(s.rss_kib for s in steady))
    assert growth <= allowed, (
        f"the daemon's RSS grows {growth / 1024:.1f} MiB over {steady[-1].built - steady[0].built}"
        f" records built (allowed {allowed / 1024:.1f} MiB); samples (made, built, RSS KiB):"
        f" {[(s.made, s.built, s.rss_kib) for s in samples]}")
    # the lag is back to 0: every record appended is in the derived files
    assert end.made == end.built > 0
    assert built.offsets == logs

    devices = _devices(stdout)
    assert len(devices) == 2
    with ControlBlock(root, create=False) as block:
        slots = {str(s.pid): s for s in block.procs()}
    rows = {pid: 0 for pid in devices}
    for rnd, (stat, extra, marker) in round_counts(root).items():
        assert stat is not None and stat == extra == marker, (
            f"{rnd}: statistic.csv {stat} rows, statistic_extra.csv {extra},"
            f" ROUND_COMPLETE.json {marker}")
        rows[rnd.split("/")[0].split("_")[1]] += stat
    manifest = manifest_rows(root)
    for pid, d in devices.items():
        saved = int(d["saved"])
        slot = slots[pid]
        assert (slot.drops, slot.errors) == (0, 0), slot
        assert slot.tensors_selected == slot.tensors_written == saved
        assert rows[pid] == saved
        assert len(manifest.filter(manifest["pid"] == int(pid))) == saved
    assert sum(int(d["decode_rounds"]) for d in devices.values()) > 100  # many rounds

    copy = _rebuilt_copy(root, scratch / "rebuilt")
    live = derived_files(root)
    assert derived_files(copy) == live, "the live tree differs from a rebuild"
    assert manifest_rows(copy).equals(manifest)
