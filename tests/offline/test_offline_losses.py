"""offline/stats/losses.py: `stats` counts a dump's record logs as the tree builder
does, by the shim's record layout and without a JSON parse per record."""

from __future__ import annotations

import json
import shutil

from offline_helpers import run_cli

from msprobe_atb.offline.stats.losses import tally_logs


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
