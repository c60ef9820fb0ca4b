"""Op names that are not UTF-8 through every offline reader (real processes, a
dump written by the real shim and daemon): each reader names them in the text
form of tree/names.py (an odd byte as \\xNN, a backslash as \\x5c), and every
path it gives leads to the file, with the Parquet manifest and without it.
Before, `compare` found 28 of 32 tensors "unreadable" through the manifest, and
without one `stats`/`compare` exited 2 and `report`/`index` raised a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from robust_helpers import DUMP_ALL, cli, probe_host, wait_daemon_gone

from msprobe_atb.tree.incidents import DIR, IncidentBook, file_name
from msprobe_atb.tree.names import os_path

LAYERS = (b"Op\xff\xfe", b"Plain", b"Lay\xc3(", b"Back\\x41")
CHILDREN = (b"Ch\xe9", b"Lin")
BAD = "0_7/0/0_Op\udcff\udcfe/1_Lin/after/outtensor0.bin"  # holds a NaN
SHOWN = ("Op\\xff\\xfe", "Lay\\xc3(", "Back\\x5cx41", "Ch\\xe9")
TENSORS = 2 * len(LAYERS) * len(CHILDREN) * 2


def _script() -> bytes:
    rng = np.random.default_rng(0)
    lines = []
    for r in range(2):
        for li, layer in enumerate(LAYERS):
            for ci, child in enumerate(CHILDREN):
                for stage, name in ((b"before", b"intensor0"), (b"after", b"outtensor0")):
                    path = b"0_7/%d/%d_%s/%d_%s/%s/%s.bin" % (r, li, layer, ci, child, stage,
                                                             name)
                    v = rng.standard_normal(4).astype(np.float32)
                    if os.fsdecode(path) == BAD:
                        v[1] = np.nan
                    lines.append(b"save\t2\t0\t4\thex:%s\t%s\n" % (v.tobytes().hex().encode(),
                                                                  path))
    return b"".join(lines)


def _dump(out: Path) -> Path:
    out.mkdir(parents=True)
    config = out / "config.json"
    config.write_text(json.dumps({**DUMP_ALL, "task": "all"}))
    r = probe_host(out, config, _script())
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    return out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """golden and target (equal), each with its manifest and a copy without one."""
    base = tmp_path_factory.mktemp("nonutf8")
    made = {}
    for side in ("golden", "target"):
        made[side] = _dump(base / side)
        bare = base / f"{side}-bare"
        shutil.copytree(made[side], bare, symlinks=True)
        shutil.rmtree(bare / "atb_dump_data" / "manifest")
        made[f"{side}-bare"] = bare
    yield made
    shutil.rmtree(base, ignore_errors=True)


def _run(*args: str, rc: int = 0) -> str:
    r = cli(*args)
    assert "Traceback" not in r.stderr and r.returncode == rc, \
        f"{args}: rc {r.returncode}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(params=["", "-bare"], ids=["manifest", "csv"])
def kind(request):
    return request.param


def test_stats_names_the_bad_tensor_by_a_path_that_opens(dumps, kind):
    s = json.loads(_run("stats", str(dumps["target" + kind]), "--json"))
    assert s["tensors"] == TENSORS
    (first,) = s["first_nonfinite"][:1]
    assert first["op"] == "0_Op\\xff\\xfe/1_Lin" and os.path.isfile(os_path(first["path"]))
    text = _run("stats", str(dumps["target" + kind]))
    assert all(n in text for n in SHOWN[:3])


def test_compare_reads_every_pair(dumps, kind):
    out = _run("compare", "-m", "atb", "-gp", str(dumps["golden" + kind]), "-tp",
               str(dumps["target" + kind]), "-o", str(dumps["target"].parent / f"c{kind}.csv"))
    assert f"{TENSORS} pairs compared" in out and f"pass {TENSORS}" in out, out


def test_report_links_lead_to_the_files(dumps, kind):
    page = dumps["target"].parent / f"r{kind}.html"
    _run("report", str(dumps["target" + kind]), "--golden", str(dumps["golden" + kind]),
         "-o", str(page))
    html = page.read_text()
    links = re.findall(r"href='file://([^']+)'", html)
    assert links and all(os.path.exists(os.fsdecode(urllib.parse.unquote_to_bytes(u)))
                         for u in links)
    assert all(n in html for n in SHOWN[:2])


def test_index_then_query_give_paths_that_open(dumps):
    bare = dumps["golden-bare"]
    _run("index", str(bare))
    rows = json.loads(_run("query", str(bare), "--format", "json",
                           "SELECT dump_root, path, op_name FROM tensors"))
    assert len(rows) == TENSORS
    assert all(os.path.isfile(os_path(f"{r['dump_root']}/{r['path']}")) for r in rows)
    names = {r["op_name"].split("/")[0] for r in rows}
    assert names == {"Op\\xff\\xfe", "Plain", "Lay\\xc3(", "Back\\x5cx41"}
    shutil.rmtree(bare / "atb_dump_data" / "manifest")


def test_convert_and_overflow(dumps, kind, tmp_path):
    out = _run("convert", str(dumps["golden" + kind]), "-o", str(tmp_path / "npy"))
    assert f"converted {TENSORS}," in out and "errors 0" in out
    assert (tmp_path / "npy" / "atb_dump_data" / "data" / BAD.replace(".bin", ".npy")).is_file()
    text = _run("overflow", str(dumps["target" + kind]))
    assert "Op\\xff\\xfe" in text


def test_incidents_name_the_tensor_as_text(dumps, tmp_path):
    out = tmp_path / "inc"
    shutil.copytree(dumps["target"], out, symlinks=True)
    root = out / "atb_dump_data"
    book = IncidentBook(root)
    book.add_trigger(1, "nan", "nan", 1, 0, BAD, 7, {"nan": 1})
    book.flush()
    assert (root / DIR / file_name(1)).is_file()
    text = _run("incidents", str(out))
    assert "Op\\xff\\xfe/Lin" in text
