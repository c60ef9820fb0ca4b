"""Crafted incident reports (incidents/*.json of the wrong shape) do not steer or
crash the readers: `incidents`, `stats` and `report` (real processes) refuse
each by its file name with the reason, never print a traceback, and still show
the good report beside them, with its round dir inside this dump."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from offline_synth import small_model

from msprobe_atb.tree.incident_check import checked
from msprobe_atb.tree.incidents import DIR, IncidentBook, file_name, format_incident, read_incidents
from msprobe_atb.tree.records import ProcKey

GOOD_DIR = "/moved/elsewhere/atb_dump_data/data/0_4711/0"
# file name -> content: each of the wrong shape
CRAFTED: dict[str, object] = {
    "a-list": [], "a-string": "incident", "null": None, "a-number": 7, "empty": {},
    "no-trigger": {"incident": 3},
    "incident-as-string": {"incident": "3", "trigger": "inf"},
    "incident-as-bool": {"incident": True, "trigger": "inf"},
    "first-tensor-string": {"incident": 3, "trigger": "inf", "first_tensor": "2_1 Layer"},
    "stats-list": {"incident": 3, "trigger": "inf", "first_tensor": {"stats": [1, 2]}},
    "value-object": {"incident": 3, "trigger": "inf", "value": {"x": 1}},
    "feeders-numbers": {"incident": 3, "trigger": "inf", "feeding_ops": [1, 2]},
    "rounds-strings": {"incident": 3, "trigger": "inf", "flushed_rounds": ["0"]},
    "flushed-string": {"incident": 3, "trigger": "inf", "flushed": "data/0_4711/0"},
    "flushed-strings": {"incident": 3, "trigger": "inf", "flushed": ["data/0_4711/0"]},
    "dir-missing": {"incident": 3, "trigger": "inf",
                    "flushed": [{"dev_pid": "0_4711", "round": 0, "ops": {}}]},
    "dir-relative": {"incident": 3, "trigger": "inf", "flushed": [
        {"dev_pid": "0_4711", "round": 0, "dir": "data/0_4711/0", "ops": {}}]},
    "dir-javascript": {"incident": 3, "trigger": "inf", "flushed": [
        {"dev_pid": "0_4711", "round": 0, "dir": "javascript:alert(1)", "ops": {}}]},
    "dir-elsewhere": {"incident": 3, "trigger": "inf", "flushed": [
        {"dev_pid": "0_4711", "round": 0, "dir": "/etc", "ops": {}}]},
    "dev-pid-path": {"incident": 3, "trigger": "inf", "flushed": [
        {"dev_pid": "../..", "round": 0, "dir": "/x/data/../../0", "ops": {}}]},
    "round-dots": {"incident": 3, "trigger": "inf", "flushed": [
        {"dev_pid": "0_4711", "round": "..", "dir": "/x/data/0_4711/..", "ops": {}}]},
    "not-json": b"\xff\xfe{", "deep": b"[" * 100_000,
}
BAD = {k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in CRAFTED.items()}


def _good_doc(root: Path) -> dict:
    """What the control plane writes: one incident with a flushed round."""
    book = IncidentBook(root)
    book.add_trigger(1, "inf", "inf", 1_700_000_000_000_000_000, 0,
                     "0_4711/0/2_Layer/1_Linear/after/outtensor0.bin", 4711,
                     {"max": "inf", "nan": 0})
    book.add_record(ProcKey(0, 4711), {"k": "flush", "incident": 1,
                                          "rounds": [{"dir": "0_4711/0/2_Layer", "n": 4,
                                                      "as": "0"}]})
    return book.doc(book.incidents[1])


@pytest.fixture
def crafted(tmp_path):
    out = small_model(tmp_path / "out", rounds=1)
    root = out / "atb_dump_data"
    (root / DIR).mkdir()
    good = _good_doc(root)
    good["flushed"][0]["dir"] = GOOD_DIR  # written before the dump was moved here
    (root / DIR / file_name(1)).write_text(json.dumps(good))
    for i, content in enumerate(BAD.values(), start=2):
        (root / DIR / file_name(i)).write_bytes(content)
    return out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], capture_output=True,
                          text=True, timeout=120)


def test_every_bad_file_is_refused_by_name(crafted):
    docs = read_incidents(crafted / "atb_dump_data")
    assert len(docs) == 1 + len(BAD)
    good, *bad = docs
    assert good["trigger"] == "inf" and good["first_tensor"]["op_id"] == "2_1"
    assert good["flushed"][0]["dir"] == str(crafted.absolute() / "atb_dump_data/data/0_4711/0")
    for i, (what, doc) in enumerate(zip(BAD, bad), start=2):
        assert doc["incident"] == file_name(i), what
        assert doc["error"].startswith(("refused: ", "unreadable: ")), (what, doc)


def test_what_the_control_plane_writes_passes(tmp_path):
    doc = _good_doc(tmp_path)
    got = checked(json.loads(json.dumps(doc)), tmp_path)
    assert got["first_tensor"].pop("kernel") is None  # only overflow reports name one
    assert got == doc


@pytest.mark.parametrize("command", ["incidents", "incidents --json", "stats",
                                     "report -o {out}/report.html"])
def test_readers_name_bad_files_and_go_on(crafted, command):
    name, *opts = command.format(out=crafted).split()
    r = _cli(name, str(crafted), *opts)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode in (0, 1), r.stderr[-3000:]
    text = (crafted / "report.html").read_text() if name == "report" else r.stdout
    for i in range(2, 2 + len(BAD)):
        assert file_name(i) in text, f"{file_name(i)} is not named"
    good_dir = crafted.absolute() / "atb_dump_data/data/0_4711/0"
    assert (good_dir.as_uri() if name == "report" else str(good_dir)) in text
    assert "href='javascript" not in text and GOOD_DIR not in text


def test_a_feeder_that_names_no_op_is_printed(tmp_path):
    """A feeder may carry neither an op id nor a name (both may be null): the
    report prints it among the feeders without statistics, never a traceback."""
    doc = _good_doc(tmp_path)
    doc["feeding_ops"] = [{"op_id": None, "op_name": None},
                          {"op_id": None, "op_name": "weight of DecoderModel"}]
    text = format_incident(checked(json.loads(json.dumps(doc)), tmp_path))
    assert "and 1 unnamed feeder, 1 weight" in text
