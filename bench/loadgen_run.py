"""One run of the load generator (native/tests/loadgen) under the probe, into a
fresh output dir: started with the shim preloaded (the shim starts the
control-plane daemon, as in a service), the daemon pinned to a core of its
own, stopped, and everything it started taken down, the daemon too, within
bounded time whatever state the control plane is in."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench import dump_progress
from bench.common import ABI, REPO, probe_env, stop_daemon, write_config
from msprobe_atb.control.block import dump_root_of
from msprobe_atb.control.liveness import is_daemon

LOADGEN = REPO / "build" / "probe" / "bin" / f"loadgen_abi{ABI}"
# The producers' exit when they stop with nothing queued: the round they are in,
# the shim's wait for the control plane (MSPROBE_ATB_EXIT_BUILD_MS, 2 s), a margin.
EXIT_S = 10.0
DAEMON_STOP_S = 1.0  # `daemon --stop` waits this long, then SIGTERM and SIGKILL this long each
DAEMON_TERM_S = 3.0
# A run's dir holds millions of files (a directory and an op_param.json per op
# and round). Removing them slowed the next runs' producers 2-4x for minutes:
# ext4's inode allocator passes over an inode deleted less than 5 s ago, or 305 s
# while its inode-table block is dirty, which the producers' own creates keep it
# (recently_deleted()); perf put 53% of a producer's CPU in that search. So
# finished runs' dirs stay until the bench ends (removed(), also at exit), unless
# the disk has less than KEEP_FREE left: then they go before the next run, whose
# header says so. Each run starts once the dirty pages are written (settle).
KEEP_FREE = 16 << 30
_finished: list[Path] = []


def removed() -> None:
    """Every finished run's dir removed (at the end of a bench)."""
    while _finished:
        shutil.rmtree(_finished.pop(), ignore_errors=True)


atexit.register(removed)


def settle() -> tuple[float, bool]:
    """Before a run: every dirty page written, and the earlier runs' dirs removed
    if the disk runs short; (the seconds it took, whether they were removed)."""
    start = time.monotonic()
    short = bool(_finished) and shutil.disk_usage(tempfile.gettempdir()).free < KEEP_FREE
    if short:
        removed()
    os.sync()
    return time.monotonic() - start, short


@dataclass(frozen=True)
class Pinning:
    """The control plane on a core of its own, the producers (and the bench)
    on the others, where the machine has two or more."""

    daemon: frozenset[int]
    producers: frozenset[int]

    @classmethod
    def for_machine(cls) -> Pinning | None:
        cpus = sorted(os.sched_getaffinity(0))
        return cls(frozenset(cpus[:1]), frozenset(cpus[1:])) if len(cpus) >= 2 else None

    def pin_producers(self) -> None:
        """In the load generator before it runs (its devices and the daemon
        the shim starts inherit it), and in the bench itself."""
        os.sched_setaffinity(0, self.producers)

    def pin_daemon(self, pid: int) -> int:
        """Every thread of the daemon (new ones too: called at each sample);
        returns how many were pinned."""
        pinned = 0
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return 0
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), self.daemon)
                pinned += 1
            except OSError:
                pass  # the thread has ended
        return pinned

    def describe(self) -> str:
        return (f"the control-plane daemon (all its threads) on CPU {_cpus(self.daemon)}, "
                f"the producers and this bench on CPU {_cpus(self.producers)}")


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


class Waiter:
    """`msprobe-atb wait` on the dump, as a user runs it, timed to its return."""

    def __init__(self, out: Path, timeout: float):
        self.proc = subprocess.Popen([sys.executable, "-m", "msprobe_atb", "wait", str(out),
                                      "--timeout", f"{timeout:g}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.returned_ns = 0  # time.time_ns() when it returned
        self._thread = threading.Thread(target=self._wait, daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        self.proc.wait()
        self.returned_ns = time.time_ns()

    def done(self) -> bool:
        return self.returned_ns != 0

    def join(self) -> int:
        """Until it returned; its exit status."""
        self._thread.join()
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._thread.join()


class LoadRun:
    """`with LoadRun(config, args, pinning) as run:` the load generator runs in
    a temporary output dir until run.stop(); leaving the block takes down
    whatever is still running and removes the dir."""

    def __init__(self, config: dict, args: list[str], pinning: Pinning | None,
                 env: dict[str, str] | None = None):
        self.tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_pace."))
        self.out = self.tmp / "out"
        self.out.mkdir()
        self.root = dump_root_of(self.out)
        self.config, self.args, self.pinning = config, args, pinning
        self.env = env or {}  # beside the probe's own (MSPROBE_ATB_* settings)
        self.proc: subprocess.Popen | None = None
        self.daemon_pid = 0
        self.daemon_threads = 0
        self.settled_s = 0.0  # waited before it started: see settle() ...
        self.removed_first = False  # ... and whether earlier runs' dirs went then
        self._stderr = None

    def __enter__(self) -> LoadRun:
        cfg = self.out / "config.json"
        write_config(cfg, **self.config)
        if not LOADGEN.is_file():
            raise FileNotFoundError(f"{LOADGEN} is missing: `make bench` builds it")
        self.settled_s, self.removed_first = settle()
        self._stderr = open(self.tmp / "stderr", "wb")
        self.proc = subprocess.Popen(
            [str(LOADGEN), *self.args], env={**probe_env(self.out, cfg), **self.env},
            stdout=subprocess.DEVNULL, stderr=self._stderr,
            start_new_session=True,
            preexec_fn=self.pinning.pin_producers if self.pinning else None)
        return self

    def __exit__(self, *exc) -> None:
        """Producers still running have done their part (their figures are taken):
        killed, without the exit drain of what they still hold, which could
        take minutes; then the daemon."""
        try:
            if self.running():
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self._take_down_daemon()
        finally:
            self._stderr.close()
            _finished.append(self.tmp)

    def sample(self) -> dump_progress.Sample | None:
        """A look at the dump (None until a process attached); raises if the load
        generator has ended without making one."""
        s = dump_progress.sample(self.root)
        if s is None and not self.running():
            self.finish(0)  # raises if it failed
            raise RuntimeError(f"{LOADGEN.name} {' '.join(self.args)} ended without a dump")
        if s and s.daemon_pid:
            self.daemon_pid = s.daemon_pid
            if self.pinning:
                self.daemon_threads = self.pinning.pin_daemon(s.daemon_pid)
        return s

    def producer_pids(self) -> list[int]:
        """The devices' processes (the load generator's children)."""
        if not self.proc:
            return []
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """Every device finishes the round it is in and exits (exit drain and all)."""
        if self.running():
            os.killpg(self.proc.pid, signal.SIGTERM)

    def finish(self, timeout: float) -> bool:
        """Waits up to `timeout` for the load generator to exit; True if it did.
        A load generator that failed raises, with the end of its stderr."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        if self.proc.returncode != 0:
            tail = (self.tmp / "stderr").read_text(errors="replace").splitlines()[-3:]
            raise RuntimeError(f"{LOADGEN.name} exited with {self.proc.returncode}: "
                               + " / ".join(tail))
        return True

    def start_wait(self, timeout: float) -> Waiter:
        return Waiter(self.out, timeout)

    def _take_down_daemon(self) -> None:
        """`daemon --stop`, then SIGTERM, then SIGKILL: a daemon far behind would
        otherwise build for minutes after the bench."""
        stop_daemon(self.out, DAEMON_STOP_S)
        pid = self.daemon_pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not pid or not is_daemon(pid):
                return
            os.kill(pid, sig)
            deadline = time.monotonic() + DAEMON_TERM_S
            while time.monotonic() < deadline and is_daemon(pid):
                time.sleep(0.05)
