"""Helpers of the adversarial tests: the stand-in ATB run under the real shim
with the real daemon, the CLI as a user runs it, and checks of the promises
every dump keeps on the files a run leaves behind (every .bin reads in full,
every row names such a file, no temporary is left: docs/contracts.md §2, §6)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testkit import (  # noqa: F401 (derived_files: the robustness tests take it from here)
    BUILD,
    REPO,
    atb_home,
    atbsim_bin,
    derived_files,
    shim_lib,
    wait_until,
)

ABI = 1
DUMP_ALL = {"task": "tensor", "dump_enable": True, "exec_range": "all", "ids": "",
            "op_name": "", "save_child": True, "device": "", "filter_level": 0}
# Small and fast, but every op kind of the model shows up.
SMALL = ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64",
         "--prompt-len", "6", "--decode-steps", "2"]


def no_compute_model(requests: int) -> list[str]:
    """A model that does no arithmetic: the dump, not the model, is the bottleneck,
    so the copy queue fills up."""
    return ["--no-compute", "--layers", "4", "--hidden", "64", "--heads", "2",
            "--prompt-len", "16", "--decode-steps", "2", "--requests", str(requests)]


def require_built() -> None:
    missing = [str(p) for p in (atbsim_bin(ABI), shim_lib(ABI)) if not p.exists()]
    if not list((REPO / "msprobe_atb" / "control").glob("_ctl*.so")):
        missing.append("msprobe_atb/control/_ctl*.so")
    if missing:
        pytest.skip(f"not built yet: {', '.join(missing)} (run `make`)")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MSPROBE_ATB_", "ATB_"))}
    env.update(MSPROBE_ATB_PYTHON=sys.executable, PYTHONPATH=str(REPO))
    return env


def probe_env(out: Path, config: Path, **extra: str) -> dict[str, str]:
    """The environment load_atb_probe.sh gives a process (checked by tests/probe)."""
    home = atb_home(ABI)
    env = base_env()
    env.update(ATB_HOME_PATH=str(home), ATB_OUTPUT_DIR=str(out), ATB_DUMP_CONFIG=str(config),
               LD_PRELOAD=str(shim_lib(ABI)),
               LD_LIBRARY_PATH=f"{home / 'lib'}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    env.update(extra)
    return env


def atbsim_cmd(*args: str) -> list[str]:
    return [str(atbsim_bin(ABI)), "run", *args]


def run_atbsim(out: Path, config: Path, *args: str, timeout: float = 120,
               **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(atbsim_cmd(*args), env=probe_env(out, config, **extra),
                          capture_output=True, text=True, errors="replace", timeout=timeout)


def probe_host(out: Path, config: Path, script: bytes, timeout: float = 120,
               **extra: str) -> subprocess.CompletedProcess:
    """The probe's own hook host (native/tests/probe_host.cpp, linked to the real
    shim) running a command script, with the real control plane behind it."""
    env = probe_env(out, config, **extra)
    del env["LD_PRELOAD"]  # the host links the shim itself
    return subprocess.run([str(BUILD / "probe" / "bin" / f"probe_host_abi{ABI}")], input=script,
                          env=env, capture_output=True, timeout=timeout)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`msprobe-atb ...` as a separate process (a crash shows as a negative rc)."""
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], env=base_env(),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def status(out: Path) -> dict[str, Any]:
    r = cli("status", str(out), "--json")
    assert r.returncode == 0, f"status failed ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout)


def status_now(out: Path) -> dict[str, Any]:
    """What `status --json` says, computed in this process (for fast polling)."""
    from msprobe_atb.status import collect

    return collect(out / "atb_dump_data")


def wait_daemon_gone(out: Path, timeout: float = 60) -> None:
    wait_until(lambda: not status_now(out)["daemon"]["alive"], timeout=timeout, step=0.1,
               what=f"the daemon of {out} to exit")


def rebuild(out: Path) -> None:
    r = cli("rebuild", str(out))
    assert r.returncode == 0, f"rebuild failed ({r.returncode}): {r.stderr[-2000:]}"


def pretouch_block(out: Path) -> None:
    """Creates the control block and reads it whole, so that every page of it is
    allocated on a small tmpfs before the disk fills (otherwise a SIGBUS on a
    page of it hits status or the daemon at random)."""
    from msprobe_atb.control.block import ControlBlock

    out.mkdir(parents=True, exist_ok=True)
    with ControlBlock(out / "atb_dump_data", create=True) as block:
        block.procs()
        block.read_config()


def fill(fs: Path, leave_kib: int = 0) -> Path:
    """Fills the file system of fs, leaving about leave_kib KiB free; the filler file."""
    filler = fs / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize > leave_kib * 1024:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def record_logs(root: Path) -> list[Path]:
    return sorted((root / ".probe" / "records").glob("*.jsonl"))


def records(root: Path) -> list[dict[str, Any]]:
    """Every complete record line (a last line cut by a crash is skipped)."""
    out = []
    for f in record_logs(root):
        data = f.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            out.append(json.loads(line))
    return out


def temp_files(base: Path) -> list[Path]:
    return [p for p in base.rglob("*") if p.name.endswith(".tmp")]


def csv_rows(root: Path) -> list[tuple[Path, dict[str, str], dict[str, str]]]:
    """(csv file, statistic.csv row, its statistic_extra.csv row) of every round."""
    out = []
    for stat in sorted((root / "data").glob("*/*/statistic.csv")):
        with open(stat, newline="") as f:
            rows = list(csv.DictReader(f))
        with open(stat.with_name("statistic_extra.csv"), newline="") as f:
            extra = list(csv.DictReader(f))
        assert len(rows) == len(extra), f"{stat}: statistic_extra.csv is not row-aligned"
        out += [(stat, r, e) for r, e in zip(rows, extra)]
    return out


def assert_readable_tree(root: Path) -> int:
    """The reader's promises: every .bin on disk parses in full, every CSV row that
    says data was written points at such a file, no temporary file is left.
    Returns the number of rows."""
    from msprobe_atb.offline.read.binfile import load_bin

    for p in sorted((root / "data").rglob("*.bin")):
        load_bin(p)  # raises on a partial file
    rows = csv_rows(root)
    for stat, row, extra in rows:
        if extra["Data Status"] in ("bin", "linked", "stub"):
            path = Path(row["Tensor Path"])
            assert path.is_file(), f"{stat}: row points at a missing file {path}"
            assert str(path.resolve()).startswith(str(root.resolve()) + os.sep)
            load_bin(path)
    assert not temp_files(root / "data"), f"temporary files left: {temp_files(root / 'data')}"
    return len(rows)
