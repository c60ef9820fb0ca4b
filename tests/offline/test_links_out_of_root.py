"""Every offline command that reads .bin files refuses one that is a symbolic link
to a file outside the dump root, and says so in the confinement's own words
(read/confine.py), not as a missing file or a tensor that was never dumped. The
dump: the injected real dump, whose first NaN/Inf op's output (the file replay,
diagnose and bisect read first) is such a link. `query` reads no .bin file;
`incidents` replays through replay's loader (a dump with incidents is not made
here)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

HANG = 300  # seconds: only a hang takes this long


@pytest.fixture(scope="module")
def linked(real_dumps, tmp_path_factory):
    """(the dump, its root, where the link leads): a copy of the injected dump whose
    injected op's output is a link out of its root."""
    base = tmp_path_factory.mktemp("links")
    dump = base / "dump"
    shutil.copytree(real_dumps["injected"], dump, symlinks=True)
    root = dump / "atb_dump_data"
    (victim,) = root.glob("data/*/0/1_Prefill_layer/5_SelfAttentionOperation/after/outtensor0*.bin")
    outside = base / "outside.bin"
    shutil.copy(victim, outside)
    victim.unlink()
    victim.symlink_to(outside)
    yield dump, root, outside
    shutil.rmtree(base, ignore_errors=True)


COMMANDS = {
    "replay": lambda d, r, g, o: ["replay", d, "--all"],
    "compare": lambda d, r, g, o: ["compare", "-gp", g, "-tp", d, "-o", o / "c.csv"],
    "convert": lambda d, r, g, o: ["convert", r, "-o", o / "npy"],
    "stats": lambda d, r, g, o: ["stats", d],
    "report": lambda d, r, g, o: ["report", d, "--golden", g, "-o", o / "r.html"],
    "diagnose": lambda d, r, g, o: ["diagnose", d],
    "bisect": lambda d, r, g, o: ["bisect", d],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bin_linked_out_of_the_root_is_named_as_refused(linked, real_dumps, tmp_path, command):
    dump, root, outside = linked
    args = COMMANDS[command](dump, root, real_dumps["golden"], tmp_path)
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", *map(str, args)],
                       capture_output=True, text=True, timeout=HANG)
    said = p.stdout + p.stderr
    if command == "report":
        said += (tmp_path / "r.html").read_text()
    assert "Traceback" not in p.stderr, p.stderr
    assert "No such file" not in said
    assert f"refused: a link out of the dump root {root} (to {outside})" in said, said[-3000:]
