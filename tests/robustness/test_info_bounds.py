"""info/ from hostile graphs through the real shim and daemon:
a 1.4 KB graph whose counts would expand to hundreds of MB is skipped and logged
while the rest of info/ is built, memory stays bounded, NaN in a param never makes
invalid JSON, and a topo node with a wrong-typed field loses only that node."""

from __future__ import annotations

import json
import subprocess
import sys

from robust_helpers import DUMP_ALL, base_env, probe_host, wait_daemon_gone
from testkit import REPO

HUGE = {"opName": "Layer_0", "opType": "Layer", "inTensorNum": 1, "outTensorNum": 1,
        "internalTensorNum": 1 << 20,
        "nodes": [{"opName": f"Op_{i}", "opType": "Op", "inTensorIds": [0],
                   "outTensorIds": [1], "internalTensorNum": 1 << 20} for i in range(8)]}
NAN_PARAM = ('{"opName": "Layer_1", "opType": "Layer", "inTensorNum": 1, "outTensorNum": 1, '
             '"param": {"eps": NaN, "scale": -Infinity, "big": 1e999, "n": 1' + "0" * 4500 +
             '}, "nodes": [{"opName": "Norm_1_0", "opType": "Norm", "inTensorIds": [0], '
             '"outTensorIds": [1], "param": {"eps": Infinity}}]}')
TOPO = {"modelName": "Model", "nodes": [
    {"opName": "Layer", "inTensors": ["x"], "outTensors": ["h0"]},
    {"opName": "Layer", "inTensors": 5, "outTensors": ["h1"]},
    {"opName": "Layer", "inTensors": ["h0"], "outTensors": ["y"]},
    {"opName": 7, "inTensors": [], "outTensors": []},
    "not a node",
]}
# the rebuild reading this dump (its Python and imports: ~60 MB, and ~75 MB more for
# polars, which writes the Parquet manifest)
RSS_LIMIT_MB = 480


def _strict(text: str):
    def refuse(name):
        raise AssertionError(f"invalid JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


# The rebuild reports its own peak (VmHWM belongs to the address space exec made):
# the kernel's ru_maxrss of a child keeps the pages of the forked pytest process
# before exec, which in a full run is itself near the limit.
_REBUILD = ("import sys\n"
            "from msprobe_atb.cli import main\n"
            "rc = main(['rebuild', sys.argv[1]])\n"
            "hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')]\n"
            "print('peak-kib', hwm[0].split()[1], file=sys.stderr)\n"
            "sys.exit(rc)\n")


def _rebuild_max_rss_mb(out) -> float:
    p = subprocess.run([sys.executable, "-c", _REBUILD, str(out)], env=base_env(), cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    [kib] = [line.split()[1] for line in p.stderr.splitlines() if line.startswith("peak-kib ")]
    return int(kib) / 1024


def test_hostile_graphs_are_bounded_and_strict_json(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    script = "".join(f"{line}\n" for line in (
        "graphen",
        f"graph\tLayer_0\t{json.dumps(HUGE)}",
        f"graph\tLayer_1\t{NAN_PARAM}",
        f"topo\tModel\t{json.dumps(TOPO)}",
        "save\t2\t1\t1\thex:003c\t0_7/0/1_Layer/before/intensor0.bin",
    )).encode()
    assert len(json.dumps(HUGE)) < 1500
    r = probe_host(out, config, script)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    root = out / "atb_dump_data"
    info = {p.relative_to(root / "info").as_posix(): p for p in (root / "info").rglob("*.json")}
    assert not any(k.endswith("/Layer_0.json") for k in info), "the huge graph was written"
    assert all(p.stat().st_size < 1 << 20 for p in info.values())
    log = (root / ".probe" / "daemon.log").read_text()
    assert "skipped layer graph Layer_0" in log and "larger than 16 MiB" in log

    [layer1] = [p for k, p in info.items() if k.endswith("/Layer_1.json")]
    doc = _strict(layer1.read_text())
    assert doc["param"]["eps"] == "NaN" and doc["param"]["scale"] == "-Infinity"
    assert doc["param"]["big"] == "1e999" and doc["param"]["n"] == "1" + "0" * 4500
    assert doc["nodes"][0]["param"] == {"eps": "Infinity"}

    [model] = [p for k, p in info.items() if k.startswith("model/")]
    nodes = _strict(model.read_text())["nodes"]
    assert [n["opName"] for n in nodes] == ["Layer_0", "Layer_2"]  # the others dropped alone
    assert "model Model: node 1 dropped" in log and "model Model: node 4 dropped" in log

    before = {k: p.read_bytes() for k, p in info.items()}
    assert _rebuild_max_rss_mb(out) < RSS_LIMIT_MB
    assert {k: p.read_bytes() for k, p in info.items()} == before
