"""Sharing: processes that load the probe but never call a hook leave no trace, and
two services (two process groups) dumping into one output dir get one daemon,
separate trees per process and a final tree equal to `rebuild`'s."""

from __future__ import annotations

import subprocess
import sys

from robust_helpers import (
    DUMP_ALL,
    assert_readable_tree,
    derived_files,
    probe_env,
    rebuild,
    records,
    status,
    wait_daemon_gone,
)
from testkit import save_config


def test_probe_in_a_process_without_hooks_creates_nothing(tmp_path):
    out = tmp_path / "out"  # does not exist: nothing may create it
    config = tmp_path / "config.json"
    save_config(config, **DUMP_ALL)
    env = probe_env(out, config, MSPROBE_ATB_ATTACH_WAIT_MS="0")
    for cmd in (["bash", "-c", "true; ls >/dev/null; (sleep 0.1 &) ; wait"],
                [sys.executable, "-c", "import os, ctypes; os.fork() or os._exit(0)"],
                ["sh", "-c", "exit 3"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode in (0, 3), r.stderr
        assert "msprobe-atb" not in r.stderr, r.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_two_services_share_one_output_dir(tmp_path, services):
    out = tmp_path / "out"
    out.mkdir()
    save_config(out / "config.json", **{**DUMP_ALL, "task": "all", "ids": "1",
                                        "queue_budget_mb": 4})
    a, b = services(out), services(out)
    for _ in range(3):
        a.request(max_tokens=2)
        b.request(max_tokens=2)
    st = status(out)
    assert st["daemon"]["alive"]
    workers = {p["pid"] for p in st["processes"]}
    assert len(workers) == 2, st["processes"]  # one worker each
    assert a.stop() == 0 and b.stop() == 0
    wait_daemon_gone(out)

    st = status(out)
    assert st["all_written"] and all(p["exited"] for p in st["processes"])
    root = out / "atb_dump_data"
    dirs = {p.name for p in (root / "data").iterdir()}
    assert dirs == {f"0_{pid}" for pid in workers}
    live = derived_files(root)
    rebuild(out)
    assert derived_files(root) == live
    tensors = [r for r in records(root) if r["k"] == "tensor"]
    assert sum(p["tensors_written"] for p in st["processes"]) == len(tensors)
    assert assert_readable_tree(root) == len(tensors)
