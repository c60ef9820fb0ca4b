"""offline/read/losses.py: `stats` counts a dump's record logs as the tree builder
does, by the shim's record layout and without a JSON parse per record."""

from __future__ import annotations

import json
import re
import shutil

from offline_helpers import run_cli

from msprobe_atb.offline.read.losses import tally_logs
from msprobe_atb.tree import progress
from msprobe_atb.tree.progress import Progress
from msprobe_atb.tree.records import records_dir


def _tensor(seq: int, path: str, file: str, task: str = "statistics") -> bytes:
    return (b'{"k":"tensor","t":1,"seq":%d,"path":"%s","format":2,"dtype":1,"dims":"4",'
            b'"size":8,"task":"%s","file":"%s","stats":null}' % (seq, path.encode(),
                                                                 task.encode(), file.encode()))


def test_the_tally_follows_the_record_log(tmp_path):
    logs = tmp_path / ".probe" / "records"
    logs.mkdir(parents=True)
    exit_rec = {"k": "exit", "t": 9, "tensors_written": 3, "errors": 6,
                "unrecorded": {"0_7/2": 4, "": 1}, "params_unrecorded": 2}
    lines = [
        _tensor(1, "0_7/0/0_Layer/before/intensor0.bin", "none"),
        _tensor(2, "0_7/0/0_Layer/after/outtensor0.bin", "lost"),
        # a record a full disk cut short, with the next one glued to it
        _tensor(3, "0_7/1/0_Layer/before/intens", "none")[:60]
        + _tensor(4, "0_7/1/0_Layer/before/intensor0.bin", "bin", "all"),
        b'{"k":"param","t":1,"seq":5,"path":"0_7/1/0_Layer/op_param.json","file":"lost"}',
        # a written one, and one whose path holds the words of a lost one (escaped)
        b'{"k":"param","t":1,"seq":7,"path":"0_7/1/1_Layer/op_param.json","file":"json"}',
        b'{"k":"param","t":1,"seq":8,"path":"0_7/1/a\\",\\"file\\":\\"lost/op_param.json",'
        b'"file":"json"}',
        _tensor(6, "0_7/1/0_Layer/after/outtensor0.bin", "none"),
        json.dumps(exit_rec, separators=(",", ":")).encode(),
    ]
    (logs / "999999999-1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    got = tally_logs(tmp_path)
    assert got.tensors == 4  # the cut one is no record
    assert got.lost == 1 + 5  # one lost record; 4 + 1 without a record of their own
    assert got.rounds == {("0_7", "0"), ("0_7", "1"), ("0_7", "2")}
    assert got.params_lost == 1 + 2  # a lost param record; 2 without a record of their own
    assert (got.unclosed, got.running, got.bad_lines) == (0, 0, 0)


def test_lost_params_are_said_and_fail_no_compare(synth_pair, tmp_path):
    """A dump whose markers count lost op_param.json files: stats says so; compare,
    whose tensors are all there, says it in a note and still passes."""
    dump = tmp_path / "golden"
    shutil.copytree(synth_pair[0], dump)
    rnd = next(p for p in (dump / "atb_dump_data" / "data").glob("*/*") if p.is_dir())
    (rnd / "ROUND_COMPLETE.json").write_text(json.dumps({"rows": 1, "lost": 0,
                                                         "params_lost": 2}))
    rc, out = run_cli("stats", str(dump))
    assert "LOST: 2 op_param.json files were not written (round markers)" in out, out
    rc, out = run_cli("compare", "-gp", str(dump), "-tp", str(dump), "-o",
                      str(tmp_path / "c.csv"))
    assert rc == 0, out
    assert "2 op_param.json files were not written" in out and "NOT A PASS" not in out, out


def test_stats_and_report_say_how_far_behind_the_derived_files_are(stats_dump, tmp_path):
    """A dump whose built.json holds all but its log's last 20 records, and no control
    plane: `stats` and `report` say how many records and how old the oldest is."""
    dump = tmp_path / "behind"
    shutil.copytree(stats_dump, dump)
    root = dump / "atb_dump_data"
    built = progress.read(root)
    name = sorted(built.offsets)[0]
    lines = (records_dir(root) / name).read_bytes().splitlines(keepends=True)
    keep = len(lines) - 20
    progress.write(root, Progress(0, built.config_sha256, {**built.offsets, name: sum(
        map(len, lines[:keep]))}, [], None, {**built.records, name: keep}))
    first_t = json.loads(lines[keep])["t"]
    rc, out = run_cli("stats", str(dump), "--json")
    s = json.loads(out)
    assert (s["derived_lag"]["records"], s["derived_lag"]["oldest_t_ns"]) == (20, first_t)
    assert not s["derived_lag"]["estimated"]
    assert re.fullmatch(r"statistic.csv 20 records behind, the oldest .+ ago, and no control "
                        r"plane is running \(`msprobe-atb wait` or `msprobe-atb rebuild` adds "
                        r"them\)", s["derived_behind"]), s["derived_behind"]
    rc, out = run_cli("stats", str(dump))
    assert "  INCOMPLETE: statistic.csv 20 records behind, the oldest " in out, out
    rc, out = run_cli("report", str(dump), "-o", str(tmp_path / "r.html"), "--json")
    info = json.loads(out)
    assert info["derived_lag"]["records"] == 20 and info["derived_behind"].startswith(
        "statistic.csv 20 records behind, the oldest ")
    assert "INCOMPLETE: statistic.csv 20 records behind, the oldest " in (
        tmp_path / "r.html").read_text()
