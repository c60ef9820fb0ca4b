"""A service pays the copy ring once: page faults of a second dump burst in the same process.

The probe's own test host (native/tests/probe_host.cpp, the real shim and control plane)
dumps a burst of tensors, goes back to awake-idle (exec_range "none") for longer than
two of the ring's trim periods, then dumps the same burst again. A burst's ring faults are
the pages of the ring (the mapping of queue_budget_mb, /proc/PID/smaps) that became
resident from the config edit that starts it until its tensors are written: one fault per
huge page where the kernel gave huge pages, else one per 4 KiB page (the host's own
faults, its fresh buffers, vary with glibc's arenas and are not counted). Counts, not times."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, atb_env, stop_daemon, write_config

HOST = REPO / "build" / "probe" / "bin" / "probe_host_abi1"
TENSORS, TENSOR_BYTES = 32, 2 << 20
RING_KIB = 1024 * 1024  # queue_budget_mb's default: the ring's mapping
# more than two trim periods (native/core/mechanisms/queue.h): the old ring was gone by then
IDLE_S = 5


class Host:
    """A running probe_host, driven line by line."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen([str(HOST)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)

    def ask(self, *commands: str) -> str:
        """Runs the commands; the answer of the last (shim messages skipped)."""
        self.proc.stdin.write("".join(c + "\n" for c in commands))
        self.proc.stdin.flush()
        while (line := self.proc.stdout.readline()).startswith("[msprobe-atb]"):
            pass
        if not line:
            raise RuntimeError("probe_host exited early")
        return line.strip()

    def faults(self) -> int:
        """Ring pages resident now: the faults that brought them in."""
        resident = 0
        size = rss = huge = 0
        for line in Path(f"/proc/{self.proc.pid}/smaps").read_text().splitlines() + ["end"]:
            key, _, value = line.partition(":")
            if "-" in key or key == "end":  # a mapping's header line (or the end)
                if size == RING_KIB:
                    resident += huge // 2048 + (rss - huge) // 4
                size = rss = huge = 0
            elif key in ("Size", "Rss", "AnonHugePages"):
                kib = int(value.split()[0])
                size, rss, huge = ((kib, rss, huge) if key == "Size" else
                                   (size, kib, huge) if key == "Rss" else (size, rss, kib))
        return resident

    def selecting(self, want: bool) -> None:
        """Waits until the hooks apply the config just written."""
        for _ in range(600):
            if self.ask("update", "range\t0") == f"range={int(want)}":
                return
            time.sleep(0.05)
        raise RuntimeError("the config edit was not applied within 30 s")

    def burst(self) -> None:
        self.ask(f"stress\t1\t{TENSORS}\t{TENSOR_BYTES}", "threads")

    def close(self) -> None:
        self.proc.communicate(timeout=120)


def _written(out: Path) -> int:
    return sum(1 for p in (out / "atb_dump_data" / "data").rglob("*.bin"))


def _burst_faults(host: Host, cfg: Path, out: Path) -> int:
    before, written = host.faults(), _written(out)
    write_config(cfg, dump_enable=True, exec_range="all")
    host.selecting(True)
    host.burst()
    for _ in range(600):
        if _written(out) >= written + TENSORS:
            break
        time.sleep(0.05)
    faults, settled = host.faults(), 0
    while settled < 5:  # writer 0 warms the ring ahead in the background: let it finish
        time.sleep(0.2)
        now = host.faults()
        settled = settled + 1 if now == faults else 0
        faults = now
    faults -= before
    write_config(cfg, dump_enable=True, exec_range="none")
    host.selecting(False)
    return faults


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp), Path(tmp) / "config.json"
        write_config(cfg, dump_enable=True, exec_range="none")
        env = atb_env()
        env.update(ATB_OUTPUT_DIR=str(out), ATB_DUMP_CONFIG=str(cfg),
                   MSPROBE_ATB_PYTHON=sys.executable)
        host = Host(env)
        try:
            host.selecting(False)
            first = _burst_faults(host, cfg, out)
            time.sleep(IDLE_S)
            second = _burst_faults(host, cfg, out)
        finally:
            host.close()
            stop_daemon(out)
    mib = TENSORS * TENSOR_BYTES >> 20
    return [f"copy ring page faults per burst of {TENSORS} x {TENSOR_BYTES >> 20} MiB tensors"
            f" ({mib} MiB; with what writer 0 warms ahead): first burst {first},"
            f" second burst after {IDLE_S} s awake-idle {second} (target: near zero)"]
