"""End-to-end helpers: a stand-in inference service started the way a user
does it (source set_env.sh and load_atb_probe.sh, then start the service)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from testkit import REPO, atb_home, atbsim_bin, shim_lib, wait_until

LOAD = REPO / "scripts" / "load_atb_probe.sh"
UNLOAD = REPO / "scripts" / "unload_atb_probe.sh"
ABI = 0


def require_artifacts(abi: int = ABI) -> None:
    missing = [str(p) for p in (atbsim_bin(abi), shim_lib(abi), LOAD, UNLOAD,
                                atb_home(abi) / "set_env.sh") if not p.exists()]
    if missing:
        pytest.skip(f"not built yet: {', '.join(missing)} (run `make`)")
    if not list((REPO / "msprobe_atb" / "control").glob("_ctl*.so")):
        pytest.skip("the cffi extension is not built (run `make pyext`)")


def fresh_env() -> dict[str, str]:
    """A login-like environment: no probe variables, no msprobe-atb on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ATB_HOME_PATH", "LD_LIBRARY_PATH", "PYTHONPATH",
                        "VIRTUAL_ENV") and not k.startswith(("ATB_", "MSPROBE_ATB_"))}
    env["PATH"] = ":".join(d for d in env.get("PATH", "").split(":")
                           if d and not os.path.exists(os.path.join(d, "msprobe-atb")))
    return env


class Service:
    """`atbsim serve` in a bash that sourced set_env.sh and load_atb_probe.sh."""

    def __init__(self, out: Path, env: dict[str, str], devices: int = 2, abi: int = ABI,
                 extra: str = "", config: Path | None = None):
        self.out = out
        self.config = config or out / "config.json"
        self.lines: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        script = (
            f'source "{atb_home(abi)}/set_env.sh" && '
            f'source "{LOAD}" --output="{out}" --config="{self.config}" && '
            f'exec "{atbsim_bin(abi)}" serve --devices {devices} --port 0 --layers 2 {extra}'
        )
        self.proc = subprocess.Popen(["bash", "-c", script], env=env, cwd=out,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = int(self.wait_line(r"Listening on 127\.0\.0\.1:(\d+)").group(1))
        self.wait_line(r"Daemon start success!")

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, pattern: str, count: int = 1, timeout: float = 60.0):
        rx = re.compile(pattern)

        def found():
            hits = [m for m in (rx.search(line) for line in list(self.lines)) if m]
            if self.proc.poll() is not None and len(hits) < count:
                raise AssertionError(f"service exited ({self.proc.returncode}) before "
                                     f"{pattern!r}:\n" + "\n".join(self.lines[-30:]))
            return hits[count - 1] if len(hits) >= count else None

        return wait_until(found, timeout=timeout, what=f"{pattern!r} in the service output")

    def count(self, pattern: str) -> int:
        rx = re.compile(pattern)
        return sum(1 for line in list(self.lines) if rx.search(line))

    def request(self, max_tokens: int = 3) -> dict:
        body = json.dumps({"model": "atbsim", "max_tokens": max_tokens,
                           "messages": [{"role": "user", "content": "hello"}]}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions",
                                     data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


def unload(out: Path, env: dict[str, str], abi: int = ABI) -> subprocess.CompletedProcess:
    script = (f'source "{atb_home(abi)}/set_env.sh" && '
              f'source "{LOAD}" --output="{out}" --config="{out}/config.json" && '
              f'source "{UNLOAD}" && env')
    return subprocess.run(["bash", "-c", script], env=env, cwd=out, capture_output=True,
                          text=True, timeout=60)


def run_dump(tmp_path: Path, env: dict[str, str], abi: int, model: list[str], **cfg) -> Path:
    """`msprobe-atb run` of `atbsim run MODEL...` with the config (default: task all,
    round 0, save_child, filter_level 1) as a user runs it; its data/ dir, complete."""
    config = {"task": "all", "dump_enable": True, "exec_range": "0,0", "ids": "",
              "op_name": "", "save_child": True, "filter_level": 1, **cfg}
    (tmp_path / "config.json").write_text(json.dumps(config))
    env = dict(env, ATB_HOME_PATH=str(atb_home(abi)))
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "run", "--output",
                        str(tmp_path / "out"), "--", "bash", "-c", '"$@" && exit 7', "sh",
                        str(atbsim_bin(abi)), "run", *model],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert p.returncode == 7, p.stdout + p.stderr  # the command's, passed through
    assert "everything selected so far has been written" in p.stdout
    root = tmp_path / "out" / "atb_dump_data"
    # complete the moment run returns: a row per record, every round marked
    records = sum(1 for f in (root / ".probe" / "records").glob("*.jsonl")
                  for line in f.read_text().splitlines() if line.startswith('{"k":"tensor"'))
    stats = list((root / "data").glob("*/*/statistic.csv"))
    assert records == sum(len(f.read_text().splitlines()) - 1 for f in stats) > 0
    assert all((f.parent / "ROUND_COMPLETE.json").exists() for f in stats)
    return root / "data"


def run_atbsim(tmp_path: Path, env: dict, config: dict, abi: int, args: list[str]) -> Path:
    """`msprobe-atb run` of `atbsim run ARGS...` under `config`; the output dir."""
    tmp_path.mkdir(exist_ok=True)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(config))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", "run", "--output", str(out),
                        "--config", str(cfg), "--", str(atbsim_bin(abi)), "run", *args],
                       env=dict(env, ATB_HOME_PATH=str(atb_home(abi))), cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    return out
