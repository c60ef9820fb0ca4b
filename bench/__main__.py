"""Runs every benchmark and prints its figures."""

from __future__ import annotations

import importlib
import sys
import time

BENCHMARKS = (
    "bench.hook_overhead",
    "bench.wake_latency",
    "bench.write_throughput",
    "bench.ring_reuse",
    "bench.stats_throughput",
    "bench.record_cost",
    "bench.offline_scale",
    "bench.compare_speed",
    "bench.stats_command",
    "bench.recorder_cost",
    "bench.overflow_scan_cost",
    "bench.serve_pace",  # before the benches that delete millions of files (README)
    "bench.daemon_memory",
    "bench.stats_pace",
    "bench.startup",
    "bench.replay_speed",
    "bench.bisect_speed",
    "bench.torch_dumper",
)


def main(names: list[str]) -> int:
    for name in names or BENCHMARKS:
        module = importlib.import_module(name)
        print(f"== {name.split('.')[-1]}: {module.__doc__.strip().splitlines()[0]}", flush=True)
        start = time.perf_counter()
        for line in module.run():
            print(f"   {line}", flush=True)
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main([f"bench.{n}" for n in sys.argv[1:]]))
