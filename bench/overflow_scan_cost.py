"""The overflow task's own scan (overflow_check.probe_scan): cost of an `atbsim run`.

With the scan, ATB copies every kernel's tensors to the host after it ran and
the shim reads each output once in its real dtype (for NaN and bf16 Inf, which
ATB's scan misses); without it only the kernel ATB reports is copied. Clean
runs (no event, so the scan never stops), the two variants interleaved run by
run on the same machine, each in its own output dir; wall time and the
stand-in process's CPU (user+sys), medians. The process does not wait at exit
for the control plane's derived files (MSPROBE_ATB_EXIT_BUILD_MS=0): that wait,
up to 2 s, is the daemon's pace, not the scan's. A computed model (the stand-in's
arithmetic) and --no-compute (the runtime's and hooks' traffic alone: the worst
case for the relative cost)."""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

from bench.common import probe_env, stop_daemon, write_config
from bench.hook_overhead import _run_cpu

MODELS = {
    "computed": ["--layers", "4", "--hidden", "256", "--heads", "4", "--vocab", "1024",
                 "--prompt-len", "32", "--decode-steps", "32", "--requests", "2",
                 "--dtype", "bf16"],
    "no-compute": ["--no-compute", "--layers", "16", "--hidden", "512", "--prompt-len", "64",
                   "--decode-steps", "32", "--requests", "4", "--dtype", "bf16"],
}
REPEAT = 7


def _env(tmp: Path, name: str, scan: bool) -> tuple[Path, dict[str, str]]:
    out = tmp / name
    out.mkdir()
    config = out / "config.json"
    write_config(config, task="overflow_check", dump_enable=True,
                 overflow_check={"overflow_nums": -1, "probe_scan": scan})
    return out, dict(probe_env(out, config), MSPROBE_ATB_EXIT_BUILD_MS="0")


def measure(args: list[str], repeat: int = REPEAT) -> dict[str, float]:
    """Medians of wall and CPU seconds without and with the scan, interleaved."""
    tmp = Path(tempfile.mkdtemp(prefix="msprobe-ovfscan-"))
    try:
        variants = {scan: _env(tmp, f"scan{int(scan)}", scan) for scan in (False, True)}
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(repeat):
            for scan, (_, env) in variants.items():
                runs[scan].append(_run_cpu(args, env))
        for out, _ in variants.values():
            stop_daemon(out)
        got = {}
        for scan, name in ((False, "off"), (True, "on")):
            got[f"{name}_wall"] = statistics.median(w for w, _ in runs[scan])
            got[f"{name}_cpu"] = statistics.median(c for _, c in runs[scan])
        return got
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run() -> list[str]:
    lines = []
    for name, args in MODELS.items():
        m = measure(args)
        lines.append(
            f"{name} ({' '.join(args)}): wall {m['off_wall']:.3f} -> {m['on_wall']:.3f} s "
            f"({100 * (m['on_wall'] / m['off_wall'] - 1):+.1f}%), CPU {m['off_cpu']:.3f} -> "
            f"{m['on_cpu']:.3f} s ({100 * (m['on_cpu'] / m['off_cpu'] - 1):+.1f}%), "
            f"medians of {REPEAT} interleaved runs each")
    return lines
