"""No file hangs a reader: a FIFO or a device in place of a data file
is refused by name, and the command goes on with the rest. Hang-prone commands run
in a child process whose timeout only turns a hang into a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from offline_synth import small_model
from replay_craft import crafted_op, op_dir, replay_json

from msprobe_atb.offline.compare.torch_mapping import MappingError, read_mapping

HANG = 120  # seconds: only a hang takes this long


def msprobe(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *map(str, args)],
                          capture_output=True, text=True, timeout=HANG)


def fifo_for(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


def first_bin(root: Path) -> Path:
    return sorted((root / "atb_dump_data" / "data").rglob("0_Norm/after/outtensor0.bin"))[0]


def test_a_fifo_bin_is_refused_by_replay(tmp_path):
    x = np.ones((4, 8), np.float32)
    root = crafted_op(tmp_path / "d", "ElewiseOperation", {"elewiseType": 8}, [x, x], [x + x])
    fifo_for(op_dir(root, "ElewiseOperation") / "after" / "outtensor0.bin")
    p = msprobe("replay", root, "--all", "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert "is a FIFO, not a regular file" in p.stdout


def test_a_fifo_op_param_is_refused_by_replay(tmp_path):
    x = np.ones((4, 8), np.float32)
    root = crafted_op(tmp_path / "d", "ElewiseOperation", {"elewiseType": 8}, [x, x], [x + x])
    fifo_for(op_dir(root, "ElewiseOperation") / "op_param.json")
    rc, doc, err = replay_json(root)  # in process: is_leaf and param() never open it
    (op,) = doc["ops"]
    assert op["verdict"] == "not-replayable" and "is a FIFO, not a regular file" in op["why"]


def test_a_fifo_bin_is_refused_by_compare_and_convert(tmp_path):
    golden, target = small_model(tmp_path / "g"), small_model(tmp_path / "t")
    fifo = fifo_for(first_bin(target))
    p = msprobe("compare", "-gp", golden, "-tp", target, "-o", tmp_path / "c.csv")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    p = msprobe("convert", fifo.parent.parent, "-o", tmp_path / "npy")
    assert "Traceback" not in p.stderr
    assert "is a FIFO, not a regular file" in p.stdout + p.stderr


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
def test_a_mapping_file_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "m.yaml"
        os.mkfifo(path)
    else:
        path = Path(kind) if kind.startswith("/") else tmp_path
    code = ("import sys\nfrom msprobe_atb.offline.compare.torch_mapping import read_mapping\n"
            "try:\n    read_mapping(sys.argv[1])\nexcept ValueError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                       timeout=HANG)
    what = {"fifo": "a FIFO", "/dev/zero": "a character device", "directory": "a directory"}
    assert f"is {what[kind]}, not a regular file" in p.stdout and not p.stderr


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi")) + "rules: [*i]\n"


@pytest.mark.parametrize("text,says", [
    (ALIAS_BOMB, "unfolds (its aliases expanded) to more than"),
    ("rules: &r [*r]\n", "unfolds (its aliases expanded) to more than"),
    ("rules: []\n#" + "x" * (5 << 20), "is larger than the"),
    ("rules: " + "[" * 50_000 + "]" * 50_000, "mapping file"),
])
def test_a_mapping_too_large_to_use_is_refused_before_use(tmp_path, text, says):
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(MappingError) as e:
        read_mapping(f)
    assert says in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text,says", [
    ("rules: [{atb: x, io: output, index: 0, torch: [[" + ", ".join(["a"] * 5000) + "]]}]",
     "torch tensor"),
    ("rules: []\x00", "is not YAML"),
])
def test_a_mapping_refusal_is_one_short_line(tmp_path, text, says):
    """Found by tests/fuzz/hostile_fuzz.py: a rule's value was printed whole (MBs), and a
    control character escaped as a traceback."""
    f = tmp_path / "m.yaml"
    f.write_text(text)
    with pytest.raises(MappingError) as e:
        read_mapping(f)
    assert says in str(e.value) and len(str(e.value)) < 400 and "\n" not in str(e.value)
