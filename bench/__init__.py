"""Benchmarks: `make bench` (python -m bench). Each module's run() returns
printable lines of measured figures; targets are reported as ratios measured
inside one run, never asserted."""
