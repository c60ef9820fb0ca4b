"""`rm -rf <output>/atb_dump_data` while the service runs (cleaning up between two
dumps, as msProbe users do): the next dump must land in a fresh tree, or at least
`status` must show the process and what it lost."""

from __future__ import annotations

import shutil
from pathlib import Path

from robust_helpers import DUMP_ALL, status_now
from testkit import save_config, wait_until


def test_dump_resumes_after_the_dump_root_is_removed(tmp_path, services):
    out = tmp_path / "out"
    out.mkdir()
    root = out / "atb_dump_data"
    save_config(out / "config.json", **{**DUMP_ALL, "task": "all", "ids": "1"})
    svc = services(out)
    svc.request(max_tokens=2)
    wait_until(lambda: status_now(out)["all_written"], what="the first dump")
    assert list(root.rglob("*.bin"))
    # the daemon may still be writing its derived files: remove until gone
    wait_until(lambda: shutil.rmtree(root, ignore_errors=True) or not root.exists(),
               what="the dump root removed")
    save_config(out / "config.json", **{**DUMP_ALL, "task": "all", "ids": "2"})

    def fresh_dump():
        # the shim notices the removal on its next monitor tick and the new
        # daemon publishes again: requests keep coming meanwhile, as in service
        svc.request(max_tokens=2)
        return list((root / "data").rglob("*.bin"))

    wait_until(fresh_dump, timeout=20, step=0.2, what="a fresh dump tree")
    assert (root / ".probe" / "control.block").exists()
    # the service's output is read by a thread: the line may trail the files it announced
    svc.wait_line("was removed; dumping into a fresh one", timeout=20)
    assert svc.proc.poll() is None
    # the daemon of the removed tree finished; the new one serves the fresh tree
    wait_until(lambda: len(daemons_of(out)) == 1, what="the old daemon to exit")


def daemons_of(out: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"daemon" in args and str(out).encode() in args:
            found.append(cmdline.parent.name)
    return found
