"""Two nodes, simulated: two stand-in services under the real shim, each with its
own output dir and host name, sharing one config file as on NFS (no file events:
the poll alone carries an edit to both control planes). The live manifests
answer SQL over both dumps, `stats` names the rank that went Inf first, `status`
lists both dirs' processes, and `rebuild` recreates each manifest row for row."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from e2e_helpers import require_artifacts
from testkit import REPO, manifest_rows, save_config, wait_until

from msprobe_atb.control.block import ControlBlock

pytestmark = pytest.mark.slow
INJECT = "inf:layer=1,op=SwiGLU,round=0"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


def test_two_nodes_one_shared_config(tmp_path, service_env, services):
    require_artifacts()
    shared = tmp_path / "nfs" / "config.json"
    shared.parent.mkdir()
    save_config(shared, dump_enable=False)
    nodes = {}
    for host, extra in (("node-a", ""), ("node-b", f"--inject {INJECT}")):
        out = tmp_path / host
        out.mkdir()
        env = dict(service_env, MSPROBE_ATB_NO_EVENTS="1", MSPROBE_ATB_POLL_S="0.3",
                   MSPROBE_ATB_HOST=host)
        nodes[host] = services(out, env, devices=2, config=shared, extra=extra)
    blocks = [ControlBlock(s.out / "atb_dump_data") for s in nodes.values()]

    # one edit on shared storage reaches both control planes through their poll
    save_config(shared, dump_enable=True, task="all", exec_range="all")
    for b in blocks:
        wait_until(lambda b=b: b.read_config()[1].state != 0, what="the wake-up published")
    for s in nodes.values():
        for _ in range(2):
            s.request(max_tokens=2)

    st = cli("status", *(str(s.out) for s in nodes.values()), "--json")
    assert st.returncode == 0, st.stderr
    listed = json.loads(st.stdout)
    assert [d["dump_root"] for d in listed] == [str(s.out / "atb_dump_data")
                                                for s in nodes.values()]
    # one worker process per device on each node
    assert [sorted(p["device"] for p in d["processes"] if p["alive"]) for d in listed] == [
        [0, 1], [0, 1]]

    save_config(shared, dump_enable=False)  # back asleep: every round completes
    for b in blocks:
        wait_until(lambda b=b: b.read_config()[1].state == 0, what="the sleep published")
    for s in nodes.values():
        s.stop()
    for b in blocks:
        wait_until(lambda b=b: b.daemon_pid == 0, timeout=60, what="the daemons' exit")
        b.close()

    live = {h: manifest_rows(s.out / "atb_dump_data") for h, s in nodes.items()}
    for h, df in live.items():
        assert df.height > 0 and df.get_column("host").unique().to_list() == [h]
        assert set(df.get_column("status")) == {"written"}
        assert df.get_column("device").n_unique() >= 1

    sql = ("SELECT host, device, round, round_seq, op_name FROM tensors "
           "WHERE nan + pinf + ninf > 0 AND ((stage = 'before' AND io = 'input') OR "
           "(stage = 'after' AND io = 'output')) "
           "QUALIFY row_number() OVER (PARTITION BY host, device ORDER BY round, round_seq) = 1 "
           "ORDER BY round, round_seq, host, device")
    q = cli("query", *(str(s.out) for s in nodes.values()), sql, "--format", "json")
    assert q.returncode == 0, q.stderr
    firsts = json.loads(q.stdout)
    # layer-level dump: the Inf leaves layer 1 (op 2) of round 0, at the same position
    # of the round on both of node-b's devices
    assert [(r["host"], r["device"], r["round"], r["op_name"]) for r in firsts] == [
        ("node-b", 0, 0, "Prefill_layer"), ("node-b", 1, 0, "Prefill_layer")]
    assert firsts[0]["round_seq"] == firsts[1]["round_seq"]

    st = cli("stats", *(str(s.out) for s in nodes.values()))
    assert st.returncode == 0, st.stderr
    out = st.stdout.splitlines()  # the diagnosis lines come first, then the ranks
    at = next(i for i, line in enumerate(out) if "round 0: NaN/Inf first on " in line)
    lines = [out[at].split("round 0: ", 1)[1], *out[at + 1:]]
    assert lines[0].startswith("NaN/Inf first on node-b device 0 ")
    assert "2_Prefill_layer" in lines[0]
    assert lines[1].startswith("  then node-b device 1 ") and "(+0)" in lines[1]
    assert lines[2] == "  2 other rank(s) stayed finite in this round"
    js = json.loads(cli("stats", *(str(s.out) for s in nodes.values()), "--json").stdout)
    clean = [r for r in js["ranks"] if r["host"] == "node-a"]
    assert clean and all(r["first_nonfinite"] is None for r in clean)

    for h, s in nodes.items():
        r = cli("rebuild", str(s.out))
        assert r.returncode == 0, r.stderr
        assert manifest_rows(s.out / "atb_dump_data").equals(live[h]), h
