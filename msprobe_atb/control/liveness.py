"""Is the process that attached as (pid, start_ns) still running?

A pid alone is not enough: pids are reused. The start time of the live pid
(from /proc) must not be later than the attach time, and a zombie is dead.
"""

from __future__ import annotations

import os

_TOLERANCE_S = 2.0  # /proc/stat btime has a 1 s granularity
_boot_time: float | None = None


def _btime() -> float | None:
    global _boot_time
    if _boot_time is None:
        try:
            with open("/proc/stat") as f:
                for line in f:
                    if line.startswith("btime "):
                        _boot_time = float(line.split()[1])
                        break
        except OSError:
            return None
    return _boot_time


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses.
    return data[data.rfind(")") + 2:].split()


def process_start_s(pid: int) -> float | None:
    """CLOCK_REALTIME seconds at which the live process `pid` started."""
    fields = _stat_fields(pid)
    boot = _btime()
    if not fields or boot is None or len(fields) < 20:
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _stat_fields(pid)
    return not (fields and fields[0] in ("Z", "X"))


def is_alive(pid: int, start_ns: int) -> bool:
    """True while the process that attached at start_ns still runs."""
    if not pid_alive(pid):
        return False
    started = process_start_s(pid)
    if started is None or not start_ns:
        return True
    return started <= start_ns / 1e9 + _TOLERANCE_S


def is_daemon(pid: int) -> bool:
    """True if `pid` is a running msprobe-atb daemon (not a reused pid)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return True  # cannot tell: trust kill(0)
    # `-m msprobe_atb daemon`, `-m msprobe_atb.daemon` or `msprobe-atb daemon`
    return b"msprobe" in cmdline and b"daemon" in cmdline
