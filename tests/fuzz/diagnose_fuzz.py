"""Every injected-fault case of diagnose (tests/offline/test_diagnose.py), which
`make test` runs a quick subset of: `make fuzz` (fuzz-diagnose) runs them all.
Prints "fuzz diagnose: N inputs tried, K findings" (a finding: a failed case)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    env = {**os.environ, "MSPROBE_ATB_TEST_DIAGNOSE_ALL": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/offline/test_diagnose.py"], cwd=REPO, env=env,
                       capture_output=True, text=True)
    print(r.stdout[-4000:], end="")
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error)", r.stdout)}
    failed = counts.get("failed", 0) + counts.get("error", 0)
    if r.returncode and not failed:
        failed = 1  # pytest itself failed (collection, usage): a finding
    print(f"fuzz diagnose: {counts.get('passed', 0) + failed} inputs tried, {failed} findings",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
