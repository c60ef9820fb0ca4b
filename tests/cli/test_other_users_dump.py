"""Another user (`nobody`, through setpriv) runs the commands on a dump that is
not theirs: one line naming the path that stops them, the permission they lack
and whose it is, exit 2, and nothing fires. (They printed a PermissionError
traceback, and `wait` exited 1, its "tensors lost" code.)"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from offline_helpers import make_real_dump, need_real
from testkit import BUILD, REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv to run commands as another user")

COMMANDS = [["trigger"], ["incidents"], ["status"], ["stats"], ["query", "SELECT 1"],
            ["wait", "--timeout", "30"]]


@pytest.fixture(scope="module")
def dump():
    """A real dump of root's, in a directory everyone may enter (pytest's own
    temporary directories are root's alone)."""
    need_real()
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    base = Path(tempfile.mkdtemp(prefix="other-user-", dir=BUILD))
    try:
        base.chmod(0o755)
        make_real_dump(base / "out", "fp32")
        yield base / "out"
    finally:
        shutil.rmtree(base)


def as_nobody(args: list[str], where: Path) -> subprocess.CompletedProcess:
    cmd, *rest = args
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           sys.executable, "-m", "msprobe_atb", cmd, str(where), *rest],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                               "HOME": "/nonexistent"})


def one_line(r: subprocess.CompletedProcess, cmd: str) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"msprobe-atb {cmd}: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_dump_another_user_cannot_enter(dump, args):
    root = dump / "atb_dump_data"
    assert root.stat().st_mode & 0o777 == 0o750  # the probe's own mode: not for others
    r = as_nobody(args, dump)
    line = one_line(r, args[0])
    assert r.returncode == 2 and r.stdout == ""
    assert (f"permission denied: you (nobody, uid {pwd.getpwnam('nobody').pw_uid}) have no "
            f"search (x) permission on {root} (owner root, uid 0;") in line
    assert not (root / "incidents").exists()  # nothing fired


@pytest.mark.parametrize("args", [["trigger"], ["status"], ["wait", "--timeout", "30"]],
                         ids=lambda a: a[0])
def test_a_control_block_another_user_may_only_read(dump, args):
    """Everything readable by others (chmod -R o+rX): the commands that map the
    control block say it is not theirs to write."""
    root = dump / "atb_dump_data"
    subprocess.run(["chmod", "-R", "o+rX", str(root)], check=True)
    try:
        r = as_nobody(args, dump)
    finally:
        subprocess.run(["chmod", "-R", "o-rwx", str(root)], check=True)
    line = one_line(r, args[0])
    block = root / ".probe" / "control.block"
    assert r.returncode == 2 and f"have no write (w) permission on {block}" in line
    assert not (root / "incidents").exists()


def test_convert_names_the_directory_it_cannot_read(dump):
    """convert of a dump another user cannot enter once said "converted 0
    ... errors 0", exit 0."""
    root = dump / "atb_dump_data"
    r = as_nobody(["convert", "-o", str(dump.parent / "npy")], dump)
    assert r.returncode == 1 and "converted 0," in r.stdout and "errors 1" in r.stdout
    assert (f"error: {root}: permission denied: you (nobody, uid "
            f"{pwd.getpwnam('nobody').pw_uid}) have no read (r) permission on {root}") \
        in r.stderr, r.stderr
