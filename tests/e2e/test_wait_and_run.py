"""`msprobe-atb wait` (and `run`'s refusal) through the real shim and daemon, and
the derived files being built while the service runs (`run`
making a dump is in test_dump_parity.py). No sleeps: each test waits with `wait`
(or polls) and checks what is on disk at the moment it returns."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from e2e_helpers import require_artifacts
from testkit import REPO, atb_home, atbsim_bin, save_config, wait_until

DUMP = {"task": "all", "dump_enable": True, "exec_range": "all", "ids": "1", "save_child": True}
SMALL = ["--layers", "2", "--decode-steps", "1", "--hidden", "32", "--heads", "2"]


def cli(*args: str, env: dict[str, str], cwd: Path | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def tensor_records(root: Path) -> int:
    return sum(1 for f in (root / ".probe" / "records").glob("*.jsonl")
               for line in f.read_text().splitlines() if line.startswith('{"k":"tensor"'))


def csv_rows(root: Path) -> int:
    return sum(len(list(csv.reader(open(f, newline="")))) - 1
               for f in (root / "data").glob("*/*/statistic.csv"))


def test_run_refuses_without_an_atb_environment(tmp_path, service_env):
    save_config(tmp_path / "config.json", **DUMP)
    p = cli("run", "--output", str(tmp_path), "--", "true", env=service_env, cwd=tmp_path)
    assert p.returncode == 2 and "ATB_HOME_PATH is not set" in p.stderr
    assert "true was not started" in p.stderr


def test_run_refuses_a_missing_config_before_the_command(tmp_path, service_env):
    """A one-shot run whose config does not exist would dump nothing and
    pass; it is an error (exit 2) and CMD is not started."""
    require_artifacts()
    env = dict(service_env, ATB_HOME_PATH=str(atb_home(0)))
    marker = tmp_path / "started"
    p = cli("run", "--output", str(tmp_path / "y"), "--config", "nonexist.json", "--",
            "touch", str(marker), env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"the config file {tmp_path / 'nonexist.json'} does not exist" in p.stderr
    assert "touch was not started" in p.stderr and not marker.exists()
    assert not (tmp_path / "y").exists()


def test_status_after_run_says_it_finished(tmp_path, service_env):
    """After `run`, the processes and the control plane have exited: status
    says the run finished, not "asleep: no control plane is running"."""
    require_artifacts()
    save_config(tmp_path / "config.json", **DUMP)
    env = dict(service_env, ATB_HOME_PATH=str(atb_home(0)))
    p = cli("run", "--output", str(tmp_path / "out"), "--", str(atbsim_bin(0)), "run", *SMALL,
            env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    for text in (p.stdout, cli("status", str(tmp_path / "out"), env=env).stdout):
        assert ("\nstate:       finished: every attached process has exited and so has the "
                "control plane (the config it last published is shown)\n") in text, text
        assert "no control plane is running" not in text


def test_rows_appear_while_the_service_runs_and_wait_follows_edits(
        tmp_path, service_env, services):
    """statistic.csv holds a request's rows while the service is still up, and
    `wait` after an edit returns with that edit in force."""
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    svc = services(out, service_env, devices=1)
    save_config(svc.config, **DUMP)
    w = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert w.returncode == 0, w.stderr
    status = json.loads(cli("status", str(out), "--json", env=service_env).stdout)
    assert status["config"]["ids"] == "1" and status["config"]["state"] == "awake"
    svc.request(max_tokens=2)
    root = out / "atb_dump_data"
    wait_until(lambda: tensor_records(root) and csv_rows(root) == tensor_records(root),
               timeout=60, what="statistic.csv rows for every tensor record")
    assert svc.proc.poll() is None  # built while the service runs, not at its exit
    w = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert w.returncode == 0 and "complete:" in w.stdout, w.stderr
    assert csv_rows(root) == tensor_records(root)
    # asleep again: every round it left is marked complete
    save_config(svc.config, dump_enable=False)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    wait_until(lambda: all((r.parent / "ROUND_COMPLETE.json").exists()
                           for r in (root / "data").glob("*/*/statistic.csv")),
               timeout=60, what="round markers once asleep")
    assert svc.proc.poll() is None


def test_wait_exit_codes(tmp_path, service_env):
    assert cli("wait", str(tmp_path), env=service_env).returncode == 2  # not a dump
    # a dump that lost a tensor (a path the shim refuses), its daemon gone
    require_artifacts()
    sys.path.insert(0, str(REPO / "tests" / "probe"))
    from probe_helpers import Dump

    (tmp_path / "lost").mkdir()
    d = Dump(tmp_path / "lost")
    d.publish({"dump_enable": True, "task": "all", "exec_range": "all"})
    d.host(1, [["save", 2, 1, "1", "hex:003c", "0_7/0/2_L/before/intensor0.bin"],
               ["save", 2, 1, "2", "hex:003c", "0_7/0/2_L/before/intensor1.bin"]])
    assert cli("wait", str(d.out), "--timeout", "0", env=service_env).returncode == 3  # locked
    d.close()  # no daemon, nobody builds the tree: wait rebuilds it
    p = cli("wait", str(d.out), "--timeout", "60", env=service_env)
    assert p.returncode == 1 and "LOST 1" in p.stdout, p.stdout + p.stderr
    assert csv_rows(d.root) == 2


def test_wait_says_a_refused_config_at_once(tmp_path, service_env, services):
    """Whatever the refusal (the file's permissions, JSON syntax, a misspelled
    key), `wait` says "refused:" with the reason and exits 4 without waiting; a fixed
    file is waited for as usual."""
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    svc = services(out, service_env, devices=1)
    save_config(svc.config, **DUMP)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    svc.config.chmod(0o664)  # writable by its group
    w = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert w.returncode == 4, w.stdout + w.stderr
    assert "msprobe-atb wait: refused: " in w.stderr and "can be written by its group" in w.stderr
    svc.config.chmod(0o644)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    for text, why in (('{"dump_enable": true,', "not valid JSON"),
                      ('{"dump_enable": true, "exec_rang": "all"}', 'unknown key "exec_rang"')):
        save_config(svc.config, raw=text)
        w = cli("wait", str(out), "--timeout", "60", env=service_env)
        assert w.returncode == 4 and "complete" not in w.stdout, w.stdout + w.stderr
        assert "msprobe-atb wait: refused: " in w.stderr and why in w.stderr, w.stderr
    save_config(svc.config, **DUMP)
    w = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert w.returncode == 0 and "refused" not in w.stderr, w.stderr
    # nothing selected yet (no request): the edit is confirmed in force,
    # not "complete: 0 selected tensors" nor "nothing to wait for"
    said = w.stdout.split(": ", 1)[1]
    assert said.startswith("config in force (the edit saved at "), w.stdout
    assert ", published as generation " in said and ": awake, dumping); nothing selected by " \
        "it yet (1 process(es) alive, " in said, w.stdout
