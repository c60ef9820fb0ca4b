"""The offline readers' fuzzer: dump data must not steer or crash the readers.
`make fuzz` runs it long (`python tests/fuzz/reader_fuzz.py`), `make test`
briefly (test_reader_fuzz.py); each target prints "fuzz NAME: N inputs tried,
K findings" (distinct failures, each shrunk to its smallest input).

* incident-files: Hypothesis-made incidents/*.json (any JSON, the control
  plane's report with one key replaced by any JSON, any bytes). `incidents`,
  `stats` (its incident lines) and `report` (its incident section) either show
  the file or refuse it by name; no exception; a round dir shown is this dump's.
* nonutf8-names: op names of any bytes (odd bytes, backslashes, quotes, markup)
  in a dump, through stats, diagnose, compare, report, index, query, convert, overflow,
  incidents and bisect (in-process, as the CLI runs them; bisect refuses the
  dump, which has no op_param.json nor info/, in one line): no error, every tensor
  read, every path a reader gives opens its file, every name shown in the text
  form of tree/names.py, which gives the bytes back.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "offline"), str(Path(__file__).parent)]

from hypothesis_run import run_property, run_targets  # noqa: E402
from offline_synth import RoundWriter  # noqa: E402

from msprobe_atb.cli import main as cli_main  # noqa: E402
from msprobe_atb.tree.incidents import DIR, IncidentBook, file_name  # noqa: E402
from msprobe_atb.tree.names import os_path, text_of  # noqa: E402
from msprobe_atb.tree.records import ProcKey  # noqa: E402

DEV_PID = "0_4711"


def cli(*args: str, ok: tuple[int, ...] = (0,)) -> str:
    """One command in this process, as `msprobe-atb` runs it; its stdout."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(list(args))
    assert rc in ok, f"msprobe-atb {' '.join(args[:2])}: exit {rc}: {err.getvalue()[-2000:]}"
    assert "Traceback" not in err.getvalue(), err.getvalue()[-2000:]
    return out.getvalue()


# ---- incident-files ----

def _good_doc(root: Path) -> dict:
    book = IncidentBook(root)
    book.add_trigger(1, "inf", "inf", 1_700_000_000_000_000_000, 0,
                     f"{DEV_PID}/0/1_Layer/after/outtensor0.bin", 4711, {"max": "inf"})
    book.add_record(ProcKey(4711, 0), {"k": "flush", "incident": 1,
                           "rounds": [{"dir": f"{DEV_PID}/0/1_Layer", "n": 2, "as": "0"}]})
    return book.doc(book.incidents[1])


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12)
KEYS = ["incident", "trigger", "value", "time", "t_ns", "round", "pid", "device", "dev_pid",
        "first_tensor", "feeding_ops", "detail", "flushed_rounds", "flushed",
        "first_tensor.stats", "first_tensor.index", "first_tensor.op_name", "flushed.0",
        "flushed.0.dir", "flushed.0.dev_pid", "flushed.0.round", "flushed.0.ops"]
DIRS = st.sampled_from(["data/0_4711/0", "javascript:alert(1)", "/etc", "/x/data/0_4711/..",
                        "/x/data/../0_4711/0", "", "/x/data/0_4711/0/../../../etc"])


@st.composite
def incident_files(draw) -> bytes:
    kind = draw(st.sampled_from(["json", "mutated", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    doc = _good_doc(Path("/fuzz/atb_dump_data"))
    where, *path = draw(st.sampled_from(KEYS)).split(".")
    holder, key = doc, where
    for step in path:
        holder = holder[key] if isinstance(holder, dict) else holder[int(key)]
        key = step if not step.isdigit() else int(step)
    new = draw(DIRS if key == "dir" else JSON)
    if draw(st.booleans()) and isinstance(holder, dict):
        holder.pop(key, None)
    else:
        holder[key] = new
    return json.dumps(doc).encode()


class IncidentFiles:
    def __init__(self, workdir: Path):
        out = workdir / "dump"
        w = RoundWriter(out / "atb_dump_data" / "data", DEV_PID, 0)
        w.add("1_Layer", "output", 0, np.arange(4, dtype=np.float32))
        w.close()
        self.out, self.root = out, out / "atb_dump_data"
        (self.root / DIR).mkdir()

    def __call__(self, data: bytes) -> None:
        from msprobe_atb.offline.report.page import Page, _incidents
        from msprobe_atb.tree.incidents import format_incident, read_incidents

        f = self.root / DIR / file_name(1)
        f.write_bytes(data)
        (doc,) = read_incidents(self.root)
        text = format_incident(doc)
        text.encode("utf-8")  # printable
        if "error" in doc:
            assert doc["incident"] == f.name and f.name in text
        data_dir = str(self.root.absolute() / "data") + "/"
        for fl in doc.get("flushed") or []:
            assert os_path(fl["dir"]).startswith(data_dir), fl["dir"]
        page = Page()
        _incidents(page, {"incidents": [doc]})
        for href in re.findall(r"href='([^']*)'", page.sections[0][2]):
            assert href.startswith("file://" + urllib.parse.quote(data_dir)), href
        assert "incident" in cli("stats", str(self.out))
        cli("incidents", str(self.out))


# ---- nonutf8-names ----

# A file name's bytes (no '/', no control characters), often a backslash, an odd
# byte, the start of a UTF-8 character, CSV and HTML specials.
NAME = st.lists(st.integers(0x20, 0xFF) | st.sampled_from(b"\\\xff\xc3\xe9<>\"',%&"),
                min_size=1, max_size=10).map(
    lambda cs: bytes(c for c in cs if c != 0x2F) or b"x").filter(
    lambda b: b not in (b".", b".."))


class NonUtf8Names:
    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.n = 0

    def _dump(self, out: Path, names: list[bytes]) -> list[str]:
        w = RoundWriter(out / "atb_dump_data" / "data", DEV_PID, 0)
        rng = np.random.default_rng(0)
        ops = []
        for i, name in enumerate(names):
            op = f"{i + 1}_{os.fsdecode(name)}"
            ops.append(op)
            x = rng.standard_normal(4).astype(np.float32)
            y = x * 2
            if i == 0:  # the first op's output is bad: stats, overflow and incidents name it
                y[1] = np.nan
            w.add(op, "input", 0, x)
            w.add(op, "output", 0, y)
        w.close()
        return ops

    def __call__(self, names: list[bytes]) -> None:
        self.n += 1
        base = self.workdir / str(self.n)
        try:
            self._check(base, names)
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def _check(self, base: Path, names: list[bytes]) -> None:
        golden, target = base / "golden", base / "target"
        ops = self._dump(golden, names)
        shutil.copytree(golden, target)
        shown = [text_of(op) for op in ops]
        for op, text in zip(ops, shown):
            assert os_path(text) == op and text.encode("utf-8")
        n = 2 * len(ops)
        s = json.loads(cli("stats", str(target), "--json"))
        assert s["tensors"] == n, s["tensors"]
        first = s["first_nonfinite"][0]
        assert first["op"] == shown[0] and os.path.isfile(os_path(first["path"])), first
        diagnosis = json.loads(cli("diagnose", str(target), "--json", ok=(0, 1, 3)))
        assert diagnosis["lines"] == s["diagnosis"]["lines"] and diagnosis["lines"]
        out = cli("compare", "-m", "atb", "-gp", str(golden), "-tp", str(target),
                  "-o", str(base / "c.csv"))
        assert f"{n} pairs compared" in out and f"pass {n}" in out, out
        cli("report", str(target), "--golden", str(golden), "-o", str(base / "r.html"))
        links = re.findall(r"href='file://([^']+)'", (base / "r.html").read_text())
        assert links and all(os.path.exists(os.fsdecode(urllib.parse.unquote_to_bytes(u)))
                             for u in links)
        cli("index", str(golden))
        rows = json.loads(cli("query", str(golden), "--format", "json",
                              "SELECT dump_root, path, op_id, op_name FROM tensors"))
        assert len(rows) == n
        for r in rows:
            assert os.path.isfile(os_path(f"{r['dump_root']}/{r['path']}")), r
            assert f"{r['op_id']}_{r['op_name']}" in shown, r
        s = json.loads(cli("stats", str(golden), "--json"))  # now through the manifest
        assert s["tensors"] == n and s["first_nonfinite"][0]["op"] == shown[0]
        out = cli("convert", str(golden), "-o", str(base / "npy"))
        assert f"converted {n}," in out and "errors 0" in out, out
        assert shown[0] in cli("overflow", str(target))
        cli("bisect", str(target), ok=(2,))
        book = IncidentBook(target / "atb_dump_data")
        book.add_trigger(1, "nan", "nan", 1, 0, f"{DEV_PID}/0/{ops[0]}/after/outtensor0.bin",
                         4711, {"nan": 1})
        book.flush()
        assert shown[0].partition("_")[2] in cli("incidents", str(target))


PROPERTIES = {
    "incident-files": (IncidentFiles, incident_files()),
    "nonutf8-names": (NonUtf8Names, st.lists(NAME, min_size=1, max_size=3, unique_by=lambda b: b)),
}


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    """Tries `examples` inputs on one target; returns (inputs tried, findings)."""
    make, inputs = PROPERTIES[name]
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as d:
        return run_property(make(Path(d)), inputs, examples, derandomize)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=None,
                    help="inputs per target (default: 2000 incident files, 100 name sets)")
    ap.add_argument("targets", nargs="*", default=list(PROPERTIES), help="default: all")
    args = ap.parse_args()
    default = {"incident-files": 2000, "nonutf8-names": 100}
    return run_targets(args.targets, lambda name: run(name, args.examples or default[name]))

if __name__ == "__main__":
    raise SystemExit(main())
