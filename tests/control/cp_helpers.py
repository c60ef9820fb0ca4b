"""Helpers for the control-plane tests: the cffi extension, a fake shim that
stands in for the native probe, and a daemon runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from testkit import REPO


def _ensure_extension() -> None:
    if not list((REPO / "msprobe_atb" / "control").glob("_ctl*.so")):
        subprocess.run([sys.executable, str(REPO / "msprobe_atb/control/_build.py")], check=True)


_ensure_extension()

from msprobe_atb.control.block import ControlBlock  # noqa: E402


class FakeShim:
    """Does what the native shim does towards the control plane: claims a slot,
    writes .bin files and appends record lines. The 'process' is a sleeping
    child, so tests can make it die."""

    def __init__(self, output: Path, dev: int = 0, config: Path | None = None):
        self.output = output
        self.dump_root = output / "atb_dump_data"
        self.child = subprocess.Popen(["sleep", "600"])
        self.pid = self.child.pid
        self.start_ns = time.time_ns()
        self.dev = dev
        self.block = ControlBlock(self.dump_root, create=True)
        self.slot = self.block.claim_proc(self.pid, self.start_ns)
        self.block.set_proc_counter(self.slot, "device", dev)
        rec_dir = self.dump_root / ".probe" / "records"
        rec_dir.mkdir(parents=True, exist_ok=True)
        self.log = rec_dir / f"{self.pid}-{self.start_ns}.jsonl"
        self.seq = 0
        self.t = 1_700_000_000_000_000_000
        self.record({"k": "attach", "pid": self.pid, "start_ns": self.start_ns, "abi": 0,
                     "host_abi": 0, "output": str(output), "config": str(config or ""),
                     "exe": "/fake/atb"})

    def record(self, rec: dict, partial: bool = False) -> None:
        self.t += 1000
        rec.setdefault("t", self.t)
        line = json.dumps(rec) + ("" if partial else "\n")
        with open(self.log, "a") as f:
            f.write(line)

    def finish_partial(self) -> None:
        with open(self.log, "a") as f:
            f.write("\n")

    def rel(self, exec_count: int, op: str, name: str) -> str:
        return f"{self.dev}_{self.pid}/{exec_count}/{op}/{name}"

    def tensor(self, exec_count: int, op: str, name: str, task: str = "tensor",
               stats: dict | None = None, dtype: int = 1, dims: str = "2,2",
               file: str = "bin", partial: bool = False, **extra) -> dict:
        rel = self.rel(exec_count, op, name)
        if file == "bin" and task != "statistics":
            path = self.dump_root / "data" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"$Version=1.0\n$End=1\n" + b"\0" * 8)
        rec = {"k": "tensor", "seq": self.seq, "path": rel, "format": 2, "dtype": dtype,
               "dims": dims, "size": 8, "task": task,
               "file": file if task != "statistics" else "none", "stats": stats, **extra}
        self.seq += 1
        self.record(rec, partial=partial)
        return rec

    def graph(self, name: str, graph: dict | str, dev: int = -1) -> None:
        text = graph if isinstance(graph, str) else json.dumps(graph)
        self.record({"k": "graph", "name": name, "dev": dev, "json": text})

    def exit(self) -> None:
        self.record({"k": "exit", "drained": True, "lost": 0})
        self.block.release_proc(self.slot)
        self.die()

    def die(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()

    def close(self) -> None:
        self.die()
        self.block.close()



class DaemonProc:
    def __init__(self, output: Path, config: Path | None, env: dict[str, str]):
        self.output = output
        self.errlog = output / "daemon.stderr"
        args = [sys.executable, "-m", "msprobe_atb", "daemon", "--output", str(output),
                "--foreground"]
        if config is not None:
            args += ["--config", str(config)]
        with open(self.errlog, "ab") as err:
            self.proc = subprocess.Popen(args, cwd=REPO, env=env, stderr=err,
                                         stdout=subprocess.DEVNULL)

    @property
    def log_text(self) -> str:
        p = self.output / "atb_dump_data" / ".probe" / "daemon.log"
        return p.read_text() if p.exists() else ""

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)


def derived(dump_root: Path) -> dict[str, bytes]:
    """Every derived file under a dump root (not .probe, not .bin, not the manifest,
    whose files differ with the flush history: it is compared row for row), by
    relative path."""
    out = {}
    for base, _dirs, files in os.walk(dump_root):
        for f in files:
            p = Path(base) / f
            rel = p.relative_to(dump_root).as_posix()
            if rel.startswith((".probe", "manifest/")) or f.endswith(".bin"):
                continue
            out[rel] = p.read_bytes()
    return out
