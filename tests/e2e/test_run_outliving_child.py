"""`msprobe-atb run -- CMD` where CMD starts a host in the background and exits
first: run waits for every attached process, so its summary and last line are
the final counts; if --timeout ends the wait first, it says plainly which
processes still run and that the counts are not final. (It returned 0 once CMD
exited, with a last line contradicting the counts above it, while the child went
on dumping.) Real shim, daemon and stand-in host; no timed assertions."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from e2e_helpers import require_artifacts
from testkit import atb_home, atbsim_bin, save_config

from msprobe_atb.status import collect

# Round 0, then nothing for a while, then round 1200: a quiet host still running.
STATS = {"task": "statistics", "dump_enable": True, "exec_range": "0,0,1200,1200"}
HOST = ["run", "--layers", "2", "--hidden", "32", "--heads", "2"]


def run_outliving(tmp_path: Path, env: dict[str, str], decode_steps: int,
                  timeout: str) -> subprocess.CompletedProcess:
    """run -- sh -c "HOST & exit": the host outlives the command that started it
    (which exits once the host has written its first record)."""
    save_config(tmp_path / "config.json", **STATS)
    host = " ".join([str(atbsim_bin(0)), *HOST, "--decode-steps", str(decode_steps)])
    attached = "until ls out/atb_dump_data/.probe/records/*.jsonl; do sleep 0.05; done"
    return subprocess.run(
        [sys.executable, "-m", "msprobe_atb", "run", "--timeout", timeout, "--output",
         str(tmp_path / "out"), "--", "sh", "-c",
         f"{host} >/dev/null 2>&1 & {attached} >/dev/null 2>&1; exit 0"],
        env=dict(env, ATB_HOME_PATH=str(atb_home(0))), cwd=tmp_path, capture_output=True,
        text=True, timeout=600)


def tensor_records(root: Path) -> int:
    return sum(1 for f in (root / ".probe" / "records").glob("*.jsonl")
               for line in f.read_text().splitlines() if line.startswith('{"k":"tensor"'))


def test_run_waits_for_a_child_that_outlives_the_command(tmp_path, service_env):
    require_artifacts()
    p = run_outliving(tmp_path, service_env, decode_steps=1500, timeout="300")
    assert p.returncode == 0, p.stdout + p.stderr
    root = tmp_path / "out" / "atb_dump_data"
    records = tensor_records(root)  # the host has exited: this is every tensor
    assert records > 0
    procs = re.findall(r"pid (\d+) device \d+: (\w+); .* tensors (\d+)/(\d+) written", p.stdout)
    assert len(procs) == 1 and procs[0][1] == "exited", p.stdout
    assert int(procs[0][2]) == int(procs[0][3]) == records
    assert p.stdout.rstrip().splitlines()[-1] == (
        f"{root}: {records} selected tensors written by 1 process(es)")


def test_run_that_times_out_says_which_processes_still_run(tmp_path, service_env):
    require_artifacts()
    p = run_outliving(tmp_path, service_env, decode_steps=1 << 20, timeout="1")
    root = tmp_path / "out" / "atb_dump_data"
    alive = [x["pid"] for x in collect(root)["processes"] if x["alive"]]
    try:
        assert len(alive) == 1, p.stdout + p.stderr
        assert (f"1 process(es) sh started still run and dump (pid {alive[0]}): the counts "
                "above are not final") in p.stderr
        assert "msprobe-atb run: the dump is not complete after 1 s" in p.stderr
        assert "selected tensors written by" not in p.stdout  # no count claimed as final
    finally:
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
