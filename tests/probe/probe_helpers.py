"""Helpers for the probe tests: an output dir with a control block that the
test publishes into itself (holding daemon.lock so no control plane is
started), runners for the probe's own hook host and for atbsim under the
shim, record/trace readers and a Python oracle of the selection rules."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import BUILD, atbsim_bin, shim_lib


def host_bin(abi: int) -> Path:
    return BUILD / "probe" / "bin" / f"probe_host_abi{abi}"


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ATB_OUTPUT_DIR", "ATB_DUMP_CONFIG", "ATBSIM_SAVE_TRACE")
           and not k.startswith("MSPROBE_ATB_")}
    env["MSPROBE_ATB_PYTHON"] = sys.executable
    return env


class Dump:
    """One output dir. `publish(raw)` compiles a config dict with the control
    plane's own validator and publishes it into the block; while `locked`,
    the test holds daemon.lock, so the shim never starts a daemon."""

    def __init__(self, base: Path, locked: bool = True):
        self.base = base
        self.out = base / "out"
        self.root = self.out / "atb_dump_data"
        self.data = self.root / "data"
        self.config = base / "config.json"
        self.config.write_text("{}\n")
        self._lock_fd: int | None = None
        (self.root / ".probe").mkdir(parents=True, exist_ok=True)
        if locked:
            self.lock()

    def lock(self) -> bool:
        """Holds daemon.lock (re-created if the tree was removed); False if a
        daemon took it first."""
        self.close()
        (self.root / ".probe").mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".probe" / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def publish(self, raw: dict[str, Any] | None = None, error: str | None = None) -> None:
        from msprobe_atb.config.compile import compile_config
        from msprobe_atb.config.schema import validate
        from msprobe_atb.control.block import ControlBlock

        with ControlBlock(self.root, create=True) as block:
            if raw is not None:
                block.publish(compile_config(validate(raw)))
            if error is not None:
                block.set_error(error)

    def env(self, **extra: str) -> dict[str, str]:
        env = base_env()
        env.update(ATB_OUTPUT_DIR=str(self.out), ATB_DUMP_CONFIG=str(self.config),
                   MSPROBE_ATB_ATTACH_WAIT_MS="0")
        env.update(extra)
        return env

    # ---- running things ----
    def host(self, abi: int, lines: list[str], check: bool = True,
             **extra: str) -> subprocess.CompletedProcess:
        script = "".join("\t".join(map(str, line)) + "\n" if isinstance(line, (list, tuple))
                         else line + "\n" for line in lines)
        p = subprocess.run([str(host_bin(abi))], input=script, capture_output=True, text=True,
                           env=self.env(**extra), timeout=60)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        return p

    def atbsim(self, host_abi: int, *args: str, shim_abi: int | None = None, check: bool = True,
               **extra: str) -> subprocess.CompletedProcess:
        shim_abi = host_abi if shim_abi is None else shim_abi
        env = self.env(LD_PRELOAD=str(shim_lib(shim_abi)),
                       ATBSIM_SAVE_TRACE=str(self.base / "trace.jsonl"), **extra)
        p = subprocess.run([str(atbsim_bin(host_abi)), "run", *args], capture_output=True,
                           text=True, env=env, timeout=120)
        if check:
            assert p.returncode == 0, p.stdout + p.stderr
        return p

    # ---- reading results ----
    def records(self) -> list[dict[str, Any]]:
        """The shim's records, each checked against records.h (the hooks these tests
        drive make records the stand-in never makes: lost, refused, empty ones)."""
        from msprobe_atb.tree.record_schema import problems

        out = []
        for f in sorted((self.root / ".probe" / "records").glob("*.jsonl")):
            out += [json.loads(line) for line in f.read_text().splitlines()]
        bad = [f"{p}: {r}" for r in out for p in problems(r, "shim")]
        assert not bad, "records not as records.h declares them:\n" + "\n".join(bad[:20])
        return out

    def tensors(self, file: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.records()
                if r["k"] == "tensor" and (file is None or r["file"] == file)]

    def trace(self) -> list[dict[str, Any]]:
        f = self.base / "trace.jsonl"
        return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []

    def files(self) -> set[str]:
        """Every file under the output dir except the control plane's state."""
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*")
                if p.is_file() and ".probe" not in p.parts}


class HeldThreads:
    """Threads of a child process held still with ptrace (the others run on), and
    let go: as a stopped disk would hold a writer, but only those threads."""

    SEIZE, INTERRUPT, DETACH, WALL = 0x4206, 0x4207, 17, 0x40000000

    def __init__(self, pid: int, name: str):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long] * 2 + [ctypes.c_void_p] * 2
        self.tids: list[int] = []
        for tid in map(int, os.listdir(f"/proc/{pid}/task")):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if not f.read().startswith(name):
                    continue
            if self.libc.ptrace(self.SEIZE, tid, None, None) != 0:
                self.release()
                pytest.skip(f"cannot ptrace a thread (errno {ctypes.get_errno()})")
            self.tids.append(tid)
            self.libc.ptrace(self.INTERRUPT, tid, None, None)
            os.waitpid(tid, self.WALL)  # in its ptrace stop

    def release(self) -> None:
        for tid in self.tids:
            if self.libc.ptrace(self.DETACH, tid, None, None) != 0:
                # not in its stop any more: the process exited meanwhile (the
                # threads let go before it did all the work), killing it, and
                # only its tracer can reap it (else the process stays a zombie)
                try:
                    os.waitpid(tid, self.WALL)
                except ChildProcessError:
                    pass
        self.tids = []


# ---- .bin files ----

def read_bin(path: Path) -> tuple[dict[str, str], bytes]:
    blob = path.read_bytes()
    head, payload = blob.split(b"$End=1\n", 1)
    attrs = dict(line.split("=", 1) for line in head.decode().splitlines())
    return attrs, payload


def real_payload(dump: Dump, rel: str) -> bytes:
    """The payload of a .bin, following a dedup stub to the real file."""
    path = dump.data / rel
    attrs, payload = read_bin(path)
    if "data" in attrs:
        attrs2, payload = read_bin((path.parent / attrs["data"]).resolve())
        assert "data" not in attrs2
    return payload


NP_DTYPES = {0: np.float32, 1: np.float16, 2: np.int8, 3: np.int32, 4: np.uint8, 6: np.int16,
             7: np.uint16, 8: np.uint32, 9: np.int64, 10: np.uint64, 11: np.float64,
             12: np.uint8}


def decode(payload: bytes, dtype: int) -> np.ndarray:
    if dtype == 27:  # bf16: the upper half of a float32
        u = np.frombuffer(payload, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    a = np.frombuffer(payload, dtype=NP_DTYPES[dtype])
    if dtype == 12:
        a = (a != 0).astype(np.uint8)
    return a


# ---- the selection rules (docs/msprobe_format.md §5.1-§5.2 with §10 item 3), as an oracle ----

def runner_dir(path: str) -> str:
    """The op/kernel dir a tensor or op_param.json path belongs to."""
    parts = path.split("/")[:-1]
    if parts and parts[-1] in ("before", "after"):
        parts = parts[:-1]
    return "/".join(parts)


def oracle_selected(dirpath: str, cfg: dict[str, Any]) -> bool:
    segs = dirpath.split("/")
    if len(segs) < 3:
        return False
    devices = [int(d) for d in str(cfg.get("device", "")).split(",") if d.strip()]
    if devices and int(segs[0].split("_")[0]) not in devices:
        return False
    ex = cfg.get("exec_range", "0,0")
    count = int(segs[1])
    if ex == "none":
        return False
    if ex != "all":
        nums = [int(x) for x in ex.split(",")]
        if len(nums) == 1:
            nums = nums * 2
        if not any(lo <= count <= hi for lo, hi in zip(nums[::2], nums[1::2])):
            return False
    ids = [x.strip() for x in cfg.get("ids", "").split(",") if x.strip()]
    names = [x.strip().lower() for x in cfg.get("op_name", "").split(",") if x.strip()]
    child = cfg.get("save_child", False)
    ops = segs[2:]
    if not ids and not names:
        return child or len(ops) == 1
    if any("_" not in s or s.startswith("_") for s in ops):
        return False
    op_ids = [s.split("_", 1)[0] for s in ops]
    op_names = [s.split("_", 1)[1].lower() for s in ops]
    for i in ids:
        toks = i.split("_")
        if toks == op_ids or (child and op_ids[:len(toks)] == toks):
            return True
    for n in names:
        cands = op_names if child else op_names[-1:]
        if any(c.startswith(n) for c in cands):
            return True
    return False


PID_SEG = re.compile(r"^(-?\d+)_\d+/")


def norm(path: str) -> str:
    """A path with its pid replaced, to compare runs."""
    return PID_SEG.sub(r"\1_PID/", path)
