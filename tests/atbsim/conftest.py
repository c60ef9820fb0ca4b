"""Fixtures for the stand-in ATB (atbsim) tests: artifact paths, running a
host process with the test-only recording probe preloaded, reading JSON-line
logs. Generic on purpose: the runtime and the model tests both use it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from testkit import BUILD, atb_home

TEST_BUILD = BUILD / "test"
# offline_helpers.make_real_dump: the stand-in under the real probe, for real dumps
sys.path.insert(0, str(Path(__file__).parents[1] / "offline"))


def recording_probe(abi: int) -> Path:
    """Test-only LD_PRELOAD probe that logs every hook call (RECPROBE_LOG)."""
    return TEST_BUILD / f"librecording_probe_abi{abi}.so"


def protocol_host(abi: int) -> Path:
    return TEST_BUILD / f"protocol_host_abi{abi}"


def require(*paths: Path) -> None:
    """Fail (not skip) with the command that builds a missing artifact."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.fail(f"missing build artifacts {missing}: run `make -j2 native native-test`")


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class HostRun:
    """One finished host process: its exit status, output, pid, and the
    recording probe's calls / the runtime's SaveTensor trace."""

    returncode: int
    stdout: str
    stderr: str
    pid: int
    calls: list[dict] = field(default_factory=list)
    trace: list[dict] = field(default_factory=list)

    def fns(self) -> list[str]:
        return [c["fn"] for c in self.calls if c["seq"] >= 0]

    def of(self, fn: str) -> list[dict]:
        return [c for c in self.calls if c["fn"] == fn]


@pytest.fixture
def run_host(tmp_path: Path, clean_env: dict[str, str]):
    """run_host(cmd, preload=None, answers="all-true", env=None) -> HostRun.

    Runs `cmd` with `preload` in LD_PRELOAD (a recording probe, usually),
    RECPROBE_ANSWERS=answers, RECPROBE_LOG and ATBSIM_SAVE_TRACE in tmp_path,
    cwd tmp_path, and a 60 s timeout."""
    counter = iter(range(1_000_000))

    def run(
        cmd: list[str | Path],
        preload: Path | None = None,
        answers: str = "all-true",
        env: dict[str, str] | None = None,
    ) -> HostRun:
        n = next(counter)
        log, trace = tmp_path / f"calls{n}.jsonl", tmp_path / f"trace{n}.jsonl"
        full_env = dict(clean_env)
        full_env.update(
            RECPROBE_LOG=str(log), RECPROBE_ANSWERS=answers, ATBSIM_SAVE_TRACE=str(trace)
        )
        if preload is not None:
            require(preload)
            full_env["LD_PRELOAD"] = str(preload)
        full_env.update(env or {})
        require(Path(cmd[0]))
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            cwd=tmp_path,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"{cmd} timed out; stderr: {err[-2000:]}")
        return HostRun(proc.returncode, out, err, proc.pid, read_jsonl(log), read_jsonl(trace))

    return run


class AtbsimPaths:
    """Artifact paths, as a fixture so test modules need not import conftest."""

    build = BUILD

    @staticmethod
    def home(abi: int) -> Path:
        return atb_home(abi)

    @staticmethod
    def lib(abi: int, name: str) -> Path:
        path = atb_home(abi) / "lib" / name
        require(path)
        return path

    recording_probe = staticmethod(recording_probe)
    protocol_host = staticmethod(protocol_host)
    read_jsonl = staticmethod(read_jsonl)


@pytest.fixture
def atbsim_paths() -> type[AtbsimPaths]:
    return AtbsimPaths
