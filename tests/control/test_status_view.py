"""What `status` says, in words that never contradict each other, and the live
`--watch` view in a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

from test_daemon import LAYER2, block_of, cli
from testkit import REPO, save_config, wait_until

from msprobe_atb import status
from msprobe_atb.tree import lag, progress
from msprobe_atb.tree.progress import Progress


def _status(out_dir, env) -> str:
    return cli("status", str(out_dir), env=env).stdout


def test_asleep_says_why(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, dump_enable=False)
    shims(out_dir, dev=0, config=cfg)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    assert f'asleep: "dump_enable" is false in {cfg}' in _status(out_dir, daemon_env)
    cfg.unlink()
    wait_until(lambda: "does not exist" in _status(out_dir, daemon_env), timeout=20,
               what="status to notice the deleted config")
    assert f"the config file {cfg} does not exist" in _status(out_dir, daemon_env)


def test_progress_words_agree(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=1, config=cfg)
    for name, value in (("tensors_selected", 4), ("tensors_written", 4), ("ops_seen", 9)):
        shim.block.set_proc_counter(shim.slot, name, value)
    (out_dir / "atb_dump_data" / "data" / f"1_{shim.pid}" / "0").mkdir(parents=True)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    text = _status(out_dir, daemon_env)
    assert "everything selected so far has been written" in text
    assert "0 marked complete" in text and "1 still open: a round is marked once" in text
    assert "last activity" not in text and "last tensor written" in text


def test_no_tensor_written_is_not_given_a_time(out_dir, shims, daemons, daemon_env):
    """A process that wrote records (its hello, graphs) but no tensor."""
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=0, config=cfg)
    shim.block.set_proc_counter(shim.slot, "last_activity_ns", time.time_ns() - 7_600_000_000)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    text = _status(out_dir, daemon_env)
    assert "tensors 0/0 written (0 B)" in text and ", no tensor written" in text
    assert "last tensor written" not in text


def test_watch_refreshes_in_place(out_dir, shims, daemons, daemon_env):
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=1, config=cfg)
    shim.block.set_proc_counter(shim.slot, "tensors_selected", 8)
    shim.block.set_proc_counter(shim.slot, "tensors_written", 2)
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: block.published, what="the first publish")
    leader, follower = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "msprobe_atb", "status", str(out_dir), "--watch",
                          "--interval", "0.2", "--count", "3"], stdout=follower,
                         stderr=subprocess.PIPE, cwd=REPO, env=daemon_env)
    os.close(follower)
    screen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            if p.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    assert p.wait(timeout=30) == 0, p.stderr.read()
    os.close(leader)
    text = screen.decode()
    assert text.count("\x1b[H\x1b[2J") == 3  # three frames, each drawn over the last
    assert f"pid {shim.pid:>7} dev 1" in text and "[######------------------] 2/8 tensors" in text
    assert "still writing" in text


HOUR_NS = 3600 * 10**9


def _fall_behind(shim, records: int, counted: bool = True) -> int:
    """Makes built.json hold the shim's log as it is now (its attach record), then
    appends `records` tensor records, the first written an hour ago, which the slot
    counts (as the shim does) and nothing builds. Returns that first record's `t`."""
    root = shim.dump_root
    built = progress.read(root)
    built_to = {shim.log.name: shim.log.stat().st_size}
    progress.write(root, Progress(built.daemon_pid if built else 0,
                                  built.config_sha256 if built else None, built_to, [], None,
                                  {shim.log.name: 1} if counted else {}))
    first = time.time_ns() - HOUR_NS
    shim.t = first - 1000  # record() adds 1000 before each
    for i in range(records):  # past lag.WINDOW: counted from the slot, not line by line
        shim.tensor(0, "0_L", f"before/intensor{i}.bin", task="statistics")
    shim.block.set_proc_counter(shim.slot, "records", 1 + records)
    return first


AN_HOUR_AGO = r"the oldest 6\d min ago"  # an hour and the seconds the test took


def test_status_and_wait_say_how_far_behind_the_derived_files_are(out_dir, shims, daemon_env):
    """No control plane runs, the process does: nothing builds the records, and
    status and wait say how many and how old, counted from the slot."""
    shim = shims(out_dir, dev=0)
    first = _fall_behind(shim, 600)
    assert shim.log.stat().st_size > lag.WINDOW + 600
    text = _status(out_dir, daemon_env)
    assert re.search(r"\nderived files: statistic.csv 600 records behind, " + AN_HOUR_AGO
                     + ", and no control plane is running: `msprobe-atb wait` or `msprobe-atb"
                     " rebuild` builds them\n", text), text
    derived = json.loads(cli("status", str(out_dir), "--json", env=daemon_env).stdout)["derived"]
    behind = derived["behind"]
    assert (behind["records"], behind["estimated"], behind["oldest_t_ns"]) == (600, False, first)
    assert 3600 <= behind["oldest_s_ago"] < 3700 and derived["built_records"] == 1
    assert [(x["pid"], x["records"]) for x in behind["logs"]] == [(shim.pid, 600)]
    watched = status.render_watch(status.collect(shim.dump_root), {}, time.monotonic())
    assert re.search(f"\nderived files: statistic.csv 600 records behind, {AN_HOUR_AGO}\n",
                     watched), watched
    w = subprocess.run([sys.executable, "-m", "msprobe_atb", "wait", str(out_dir), "--timeout",
                        "3"], capture_output=True, text=True, cwd=REPO, env=daemon_env)
    assert w.returncode == 3, w.stdout + w.stderr
    building = re.escape("statistic.csv and info/ of 1 process(es) to be built")
    assert re.search(f"msprobe-atb wait: waiting for {building} \\(\\d+ s\\): statistic.csv 600 "
                     f"records behind, {AN_HOUR_AGO}; nothing built in the last \\d+ s: no "
                     "estimate of the time left\n", w.stderr), w.stderr
    assert re.search(f"timed out after 3 s, still waiting for {building} \\(statistic.csv 600 "
                     f"records behind, {AN_HOUR_AGO}\\)\n", w.stderr), w.stderr


def test_an_older_built_json_gives_an_estimate(out_dir, shims, daemon_env):
    """built.json without `records` (an older control plane): the count is estimated
    from the log's bytes, and said to be."""
    shim = shims(out_dir, dev=0)
    _fall_behind(shim, 600, counted=False)
    text = _status(out_dir, daemon_env)
    m = re.search(r"\nderived files: statistic.csv about ([\d,]+) records behind \(estimated "
                  r"from the record logs' sizes\), " + AN_HOUR_AGO + ", and no control", text)
    assert m and abs(int(m.group(1).replace(",", "")) - 600) <= 30, text
    behind = json.loads(cli("status", str(out_dir), "--json", env=daemon_env).stdout)[
        "derived"]["behind"]
    assert behind["estimated"] and f"{behind['records']:,}" == m.group(1)


def test_a_stalled_control_plane_is_said_behind(out_dir, shims, daemons, daemon_env):
    """A control plane that runs but builds nothing (stopped here): status says the
    records behind, and who builds them; wait measures that nothing is built."""
    cfg = out_dir / "config.json"
    save_config(cfg, **LAYER2)
    shim = shims(out_dir, dev=0, config=cfg)
    daemon = daemons(out_dir, cfg, daemon_env)
    root = out_dir / "atb_dump_data"
    wait_until(lambda: (b := progress.read(root)) and b.config_sha256
               and b.offsets.get(shim.log.name) == shim.log.stat().st_size,
               what="the control plane to build the attach record")
    daemon.proc.send_signal(signal.SIGSTOP)
    _fall_behind(shim, 2)
    text = _status(out_dir, daemon_env)
    assert re.search(r"\nderived files: statistic.csv 2 records behind, " + AN_HOUR_AGO
                     + r" \(the control plane builds them; `msprobe-atb wait` waits for "
                     r"them\)\n", text), text
    w = subprocess.run([sys.executable, "-m", "msprobe_atb", "wait", str(out_dir), "--timeout",
                        "3"], capture_output=True, text=True, cwd=REPO, env=daemon_env)
    assert w.returncode == 3 and re.search(
        r"statistic.csv 2 records behind, " + AN_HOUR_AGO + r"; nothing built in the last \d+ "
        "s: no estimate of the time left", w.stderr), w.stderr


def test_json_of_a_dir_it_cannot_read_prints_only_the_error(tmp_path):
    """stdout is what a script parses: no `[]` beside the error that says why."""
    for d in (tmp_path / "missing", tmp_path):
        r = cli("status", str(d), "--json")
        assert r.returncode == 2, r
        assert r.stdout == "", r.stdout
        assert str(d) in r.stderr
