"""The native hook fuzzer: native/tests/hook_fuzz.cpp (the shim built with
ASan/UBSan) calls every hook with hostile input while the real control plane
runs; then this checks what the run left behind. `make fuzz` runs it long
(`python tests/fuzz/native_fuzz.py --calls 100000`), `make test` briefly
(test_native_fuzz.py). Prints "fuzz native-hooks: N inputs tried, K findings".

Findings: a sanitizer report or crash; anything written outside the dump root
(the hostile absolute and ../ paths point into an `escape` dir beside it); a
selected tensor that is neither written nor counted (each SaveTensor after the
first wake must have exactly one record, and the exit counters must balance);
a written .bin that is missing or unreadable; a CSV that lacks rows for records;
a daemon that failed.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
FUZZ_BIN = REPO / "build" / "probe" / "bin" / "hook_fuzz_asan"
START_CONFIG = {"dump_enable": True, "task": "all", "exec_range": "all", "save_child": True,
                "filter_level": 1, "save_all_stages": True}  # every SaveTensor is selected
# Element widths of common dtypes (aclDataType codes): an oracle of the size check.
BITS = {0: 32, 1: 16, 2: 8, 3: 32, 4: 8, 6: 16, 7: 16, 8: 32, 9: 64, 10: 64, 11: 64, 12: 8,
        16: 64, 27: 16}
# Dtypes the shim computes statistics for (docs/contracts.md §4).
STATS_DTYPES = {0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 16, 27, 35, 36}
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
                   "SUMMARY: UndefinedBehaviorSanitizer")


def _env(out: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "LD_PRELOAD" and not k.startswith(("MSPROBE_ATB_", "ATB_"))}
    env.update(ATB_OUTPUT_DIR=str(out), ATB_DUMP_CONFIG=str(config),
               MSPROBE_ATB_PYTHON=sys.executable, PYTHONPATH=str(REPO),
               ASAN_OPTIONS="halt_on_error=1:detect_leaks=0",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    return env


def _wait_daemon_gone(root: Path, timeout: float) -> bool:
    from msprobe_atb.status import collect

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not collect(root)["daemon"]["alive"]:
            return True
        time.sleep(0.1)
    return False


def _records(root: Path) -> list[dict]:
    out = []
    for f in sorted((root / ".probe" / "records").iterdir()):
        data = f.read_bytes()
        out += [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines()]
    return out


def _outside_writes(base: Path, out: Path, config: Path) -> list[str]:
    """Everything below base that is neither the dump root's nor the config's."""
    allowed = {out, out / "atb_dump_data", config, config.with_name(config.name + ".fuzz.tmp"),
               base / "escape"}
    found = []
    for dirpath, dirs, files in os.walk(base):
        d = Path(dirpath)
        if d == out / "atb_dump_data":
            dirs[:] = []  # inside the dump root: anything goes (checked elsewhere)
            continue
        for name in dirs + files:
            p = d / name
            if p not in allowed:
                found.append(str(p))
    return found


def _links_in_tree(root: Path) -> list[str]:
    return [os.path.join(d, n) for d, dirs, files in os.walk(root) for n in dirs + files
            if os.path.islink(os.path.join(d, n))]


def check(base: Path, out: Path, config: Path, run: subprocess.CompletedProcess,
          tally: dict[str, int]) -> list[str]:
    """The findings of one run; `tally` gets the tensor records per file kind."""
    from msprobe_atb.offline.read.binfile import read_header
    from msprobe_atb.tree.csvfmt import parse_tensor_path
    from msprobe_atb.tree.fsio import valid_component

    problems = []
    err = run.stderr.decode(errors="replace")
    for mark in SANITIZER_MARKS:
        if mark in err:
            i = err.index(mark)
            problems.append(f"sanitizer: {err[max(0, i - 200):i + 3000]}")
    if run.returncode != 0:
        problems.append(f"the host exited with {run.returncode}: {err[-3000:]}")
    elif b"calls=" not in run.stdout:
        problems.append(f"the host exited 0 but printed no count: {err[-3000:]}")
    root = out / "atb_dump_data"
    if not _wait_daemon_gone(root, 120):
        problems.append("the daemon did not exit within 120 s of the host")
    problems += [f"written outside the dump root: {p}" for p in _outside_writes(base, out, config)]
    problems += [f"a link in the dump tree: {p}" for p in _links_in_tree(root)]
    if problems or not run.stdout:
        return problems
    saves = int(run.stdout.decode().split("saves=")[1].split()[0])
    recs = _records(root)
    tensors = [r for r in recs if r["k"] == "tensor"]
    for r in tensors:
        tally[r["file"]] = tally.get(r["file"], 0) + 1
    exits = [r for r in recs if r["k"] == "exit"]
    if len(exits) != 1:
        return problems + [f"{len(exits)} exit records"]
    ex = exits[0]
    if not (saves == ex["tensors_selected"] == len(tensors)
            == ex["tensors_written"] + ex["errors"] + ex["drops"]):
        problems.append(f"accounting: {saves} SaveTensor calls, {len(tensors)} tensor records, "
                        f"exit record {ex}")
    if len({r["seq"] for r in tensors}) != len(tensors):
        problems.append("a tensor has two records")
    for r in tensors:
        if r["file"] in ("bin", "stub"):
            p = root / "data" / r["path"]
            try:
                hdr = read_header(p)
            except Exception as exc:  # noqa: BLE001 - any failure is a finding
                problems.append(f"record says {r['file']} but {p!r} is unreadable: {exc}")
                continue
            bits = BITS.get(hdr.dtype)
            if r["file"] == "bin" and bits and hdr.length != -(-math.prod(hdr.dims) * bits // 8):
                problems.append(f"{p!r}: {hdr.length} payload bytes for dims {hdr.dims} of "
                                f"dtype {hdr.dtype}")
    for r in tensors:
        if r.get("stats") is not None and r["dtype"] not in STATS_DTYPES:
            problems.append(f"statistics computed for dtype {r['dtype']}, which has none: {r}")
    want_rows = 0
    for r in tensors:
        tp = parse_tensor_path(r["path"])
        if tp and valid_component(tp.dev_pid) and valid_component(tp.round_key[1]):
            want_rows += 1
    rows = sum(len(list(csv.reader(io.StringIO(f.read_bytes().decode("utf-8", "surrogateescape"),
                                               newline="")))) - 1
               for f in (root / "data").glob("*/*/statistic.csv") if f.is_file())
    if rows != want_rows:
        problems.append(f"statistic.csv has {rows} rows for {want_rows} tensor records")
    log = (root / ".probe" / "daemon.log").read_text(errors="replace")
    for bad in ("Traceback", "daemon failed"):
        if bad in log:
            i = log.index(bad)
            problems.append(f"daemon.log: {log[max(0, i - 300):i + 2000]}")
    return problems


def run(calls: int, seed: int, threads: int = 2,
        tally: dict[str, int] | None = None) -> tuple[int, list[str]]:
    """One fuzz run; returns (hook calls made, findings)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-native-") as d:
        base = Path(d)
        out, config = base / "out", base / "config.json"
        (base / "escape").mkdir()
        config.write_text(json.dumps(START_CONFIG))
        r = subprocess.run([str(FUZZ_BIN), str(calls), str(seed), str(threads), str(config),
                            str(base / "escape")], env=_env(out, config), capture_output=True,
                           timeout=3600)
        findings = check(base, out, config, r, {} if tally is None else tally)
        tried = int(r.stdout.decode().split("calls=")[1].split()[0]) if b"calls=" in r.stdout \
            else 0
        return tried, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100000, help="hook calls in all (default 100000)")
    ap.add_argument("--seed", type=int, default=None, help="default: time-based")
    ap.add_argument("--threads", type=int, default=2, help="calling threads (default 2)")
    ap.add_argument("--runs", type=int, default=4,
                    help="split the calls over this many processes (default 4)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    tried, findings = 0, []
    for i in range(args.runs):
        tally: dict[str, int] = {}
        n, f = run(args.calls // args.runs + 1, seed + i, args.threads, tally)
        kinds = ", ".join(f"{v} {k}" for k, v in sorted(tally.items()))
        print(f"  run {i + 1}/{args.runs} (seed {seed + i}): {n} calls, tensor records: "
              f"{kinds or 'none'}; {len(f)} findings", flush=True)
        tried += n
        findings += [f"seed {seed + i}: {x}" for x in f]
    for f in findings:
        print(f, file=sys.stderr)
    print(f"fuzz native-hooks: {tried} inputs tried, {len(findings)} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
