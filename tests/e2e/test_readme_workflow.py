"""README's workflow block, run line by line in a fresh bash as a user would.

The block runs in a scratch directory that looks like the top of the checkout
(build/, scripts/ and configs/ link to the real ones), so what it writes stays
out of the repository. Only the `port=` value is changed, to a free port: tests
run side by side on one machine.
"""

from __future__ import annotations

import csv
import os
import re
import signal
import socket
import subprocess

from e2e_helpers import fresh_env, require_artifacts
from testkit import REPO


def workflow_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## The workflow"):]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_workflow_works_verbatim(tmp_path):
    require_artifacts(1)
    block, n = re.subn(r"^port=\d+", f"port={free_port()}", workflow_block(), flags=re.M)
    assert n == 1, "the workflow block sets port= once"
    for name in ("build", "scripts", "configs"):
        (tmp_path / name).symlink_to(REPO / name)
    # Line by line: stop at the first command that fails, and say which one.
    script = ("trap 'echo \"README line failed ($?): $BASH_COMMAND\" >&2; kill %1 2>/dev/null;"
              " exit 1' ERR\nset -o errtrace\n" + block
              + "\ncommand -v msprobe-atb && { echo 'msprobe-atb still on PATH' >&2; exit 1; }"
              + "\nexit 0\n")
    p = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=fresh_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=300)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the service, if the block stopped early
        except ProcessLookupError:
            pass
    assert p.returncode == 0, out[-4000:]
    assert "Ready to dump ATB data" in out
    assert "complete: 228 selected tensors written by 2 process(es)" in out
    # the live dump: layer 2 of both workers, every row built
    stats = list((tmp_path / "dump/atb_dump_data/data").glob("*/*/statistic.csv"))
    assert {s.parent.parent.name.split("_")[0] for s in stats} == {"0", "1"}
    for s in stats:
        rows = list(csv.DictReader(open(s, newline="")))
        assert rows and {r["Op Id"].split("_")[0] for r in rows} == {"2"}
    # the fp16 run with an injected Inf diverges, as the comment says
    assert (tmp_path / "compare.xlsx").stat().st_size > 0 and "compare: exit 1\n" in out
    assert "FIRST DIVERGENT op (target execution order): prefill round 0, 2_Prefill_layer/" in out
    assert "NaN/Inf: target 1 +Inf; golden none" in out
    assert (tmp_path / "report.html").stat().st_size > 10_000
    # and whatever it leaves at the top of a checkout is ignored by git
    made = [p.name + ("/" if p.is_dir() else "") for p in tmp_path.iterdir()
            if p.name not in ("build", "scripts", "configs")]
    assert {"dump/", "golden/", "target/", "compare.xlsx", "report.html"} <= set(made)
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", *made],
                             capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(made)
