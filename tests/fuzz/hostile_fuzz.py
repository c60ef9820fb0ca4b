"""Fuzzer of what a user or a dump hands the readers. `make fuzz`
runs it long (`python tests/fuzz/hostile_fuzz.py`), `make test` briefly
(test_hostile_fuzz.py); each target prints "fuzz NAME: N inputs tried, K findings".

* mapping-yaml: compare's mapping file: alias bombs of any width and depth, aliases
  that contain themselves, deep nesting, YAML of any JSON, bytes. read_mapping gives
  a mapping or refuses with one line naming the file; never more than PEAK bytes.
* query-sql: SQL built from the table functions and statements that reach files
  (read_text, read_csv, read_parquet, glob, COPY, ATTACH, EXPORT, INSTALL, LOAD, SET,
  ...) over paths outside the dump root (absolute, ../, another dump, a link out),
  in any case and with comments. Findings: a secret of a file outside read, a file
  outside written or the root's listing changed, a refusal or error of more than one
  line, a traceback.
* safetensors: `atbsim run --weights` on the tiny checkpoint with a header or a
  config.json that is any JSON, a long array, a lying length, under a 2 GiB address
  space limit. Findings: a signal (std::bad_alloc aborts), an exit other than 0 or 2.
* nonregular-files: a FIFO, /dev/zero or /dev/null in place of each file a reader
  opens (a .bin for replay, compare, convert, stats, report; op_param.json;
  statistic.csv; a round marker; an info/layer graph; a manifest's meta; the mapping
  file; a checkpoint's config.json and model.safetensors). Findings: a command still
  running after HANG seconds (only a hang takes that long), a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "offline"), str(REPO / "tests"),
                str(REPO / "scripts"), str(Path(__file__).parent)]

from hypothesis_run import run_in_tmp, run_targets  # noqa: E402
from offline_synth import small_model  # noqa: E402
from replay_craft import traced  # noqa: E402

from msprobe_atb.cli import main as cli_main  # noqa: E402
from msprobe_atb.offline.compare.torch_mapping import Mapping, MappingError, read_mapping  # noqa: E402,E501

PEAK = 256 << 20
HANG = 120
SECRET = "the-secret-of-the-outside"


def cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


# ---- mapping-yaml ----

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=6), kids, max_size=4), max_leaves=20)


@st.composite
def mapping_texts(draw) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:  # an alias bomb: each level repeats the one before `width` times
        width, depth = draw(st.integers(2, 12)), draw(st.integers(1, 14))
        lines = ["l0: &l0 [" + ", ".join(["x"] * width) + "]"]
        lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]"
                  for i in range(1, depth + 1)]
        where = draw(st.sampled_from(["rules: [*l{d}]", "rules: [{{atb: x, io: output, index: 0, "
                                      "torch: *l{d}}}]", "why: *l{d}\nrules: []"]))
        return "\n".join(lines) + "\n" + where.format(d=depth) + "\n"
    if kind == 1:
        return draw(st.sampled_from(["rules: &r [*r]\n", "a: &a {b: *a}\nrules: [*a]\n",
                                     "rules: " + "[" * draw(st.integers(1, 3000))]))
    if kind == 2:
        return yaml.safe_dump({"rules": draw(st.lists(JSON, max_size=4)),
                               "heuristics": draw(JSON)})
    if kind == 3:
        return yaml.safe_dump(draw(JSON))
    if kind == 4:
        return draw(st.binary(max_size=200)).decode("latin-1")
    return "rules:\n" + "".join(f"  - {{atb: '*', io: output, index: {i}, torch: "
                                f"[m.{i} output 0], why: {draw(st.text(max_size=5))!r}}}\n"
                                for i in range(draw(st.integers(0, 30))))


def _mapping(base: Path):
    def check(text: str) -> None:
        f = base / "m.yaml"
        f.write_text(text, encoding="utf-8", errors="surrogatepass")
        def read() -> None:
            try:
                assert isinstance(read_mapping(f), Mapping)
            except MappingError as e:
                message = str(e)
                assert str(f) in message and "\n" not in message, message[:500]
                assert len(message) < 4000, len(message)
        _, peak = traced(read)
        assert peak < PEAK, f"{peak} bytes reading a mapping"
    return check


# ---- query-sql ----

READS = ["read_text('{p}')", "read_csv('{p}')", "read_parquet('{p}')", "read_json('{p}')",
         "glob('{p}')", "read_blob('{p}')", "parquet_metadata('{p}')", "read_csv_auto('{p}')",
         "sniff_csv('{p}')"]
WRITES = ["COPY (SELECT 1 AS x) TO '{p}'", "COPY tensors TO '{p}' (FORMAT parquet)",
          "ATTACH '{p}' AS x", "ATTACH '{p}' AS x; CREATE TABLE x.t AS SELECT 1",
          "EXPORT DATABASE '{p}'", "INSTALL '{p}'", "LOAD '{p}'", "INSTALL httpfs",
          "SET temp_directory = '{p}'", "SET enable_external_access = true",
          "PRAGMA enable_profiling = 'json'", "SET profiling_output = '{p}'",
          "CREATE TABLE t AS SELECT 1", "CALL duckdb_secrets()", "IMPORT DATABASE '{p}'"]


def _sql_inputs():
    paths = st.sampled_from(["{out}/secret.txt", "{out}/*", "{out}/new.csv", "{out}/new.db",
                             "/etc/passwd", "/etc/hostname", "{root}/../outside/secret.txt",
                             "{root}/link/secret.txt", "{other}/atb_dump_data/manifest/**/*",
                             "{root}/atb_dump_data/new.csv", "{root}/atb_dump_data/../x.csv",
                             "~/x", "{out}"])
    statement = st.one_of(
        st.builds(lambda f, p: f"SELECT * FROM {f.format(p=p)}", st.sampled_from(READS), paths),
        st.builds(lambda w, p: w.format(p=p), st.sampled_from(WRITES), paths))
    return st.tuples(st.lists(statement, min_size=1, max_size=3), st.booleans(), st.booleans())


def _query(base: Path):
    roots = [small_model(base / "one"), small_model(base / "other", seed=1)]
    for r in roots:
        assert cli("index", r)[0] == 0
    out = base / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET + "\n")
    (roots[0] / "link").symlink_to(out)
    watched = [out, roots[0], roots[0] / "atb_dump_data", base]

    def listing() -> dict:
        return {str(d): sorted(os.listdir(d)) for d in watched}

    before = listing()

    def check(statements: list[str], upper: bool, commented: bool) -> None:
        sql = "; ".join(s.format(out=out, root=roots[0], other=roots[1]) for s in statements)
        sql = sql.upper() if upper else sql
        if commented:
            sql = "/* x */ " + sql.replace(" ", " -- y\n ", 1)
        rc, text, err = cli("query", roots[0], sql)
        assert SECRET not in text + err and "root:" not in text, text[:500]
        assert "Traceback" not in err, err[-2000:]
        assert rc == 0 or len(err.strip().splitlines()) == 1, err
        assert listing() == before, "a file was written or removed"
    return check


# ---- safetensors ----

@st.composite
def checkpoint_files(draw) -> tuple[str, bytes]:
    import json

    which = draw(st.sampled_from(["header", "config"]))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        text = json.dumps(draw(JSON)).encode()
    elif kind == 1:  # a long array of numbers (what ran to std::bad_alloc)
        text = b"[" + b"0," * draw(st.sampled_from([10, 1 << 16, 1 << 20, 5 << 20])) + b"0]"
    elif kind == 2:
        text = b"{" + b'"a":{' * draw(st.integers(1, 200)) + b"}"
    else:
        text = draw(st.binary(max_size=300))
    if which == "config":
        return which, text
    length = draw(st.sampled_from([len(text), len(text) + 1, 0, 2**63, 100 << 20]))
    return which, length.to_bytes(8, "little") + text + draw(st.binary(max_size=64))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _checkpoint_copies(base: Path):
    """A function giving a context of a fresh copy of the tiny checkpoint, each time."""
    from tiny_llama import make_tiny_llama  # scripts/, as the tests' fixture makes it

    ckpt = make_tiny_llama(base / "tiny")
    count = [0]

    @contextlib.contextmanager
    def copy():
        count[0] += 1
        d = base / f"c{count[0]}"
        shutil.copytree(ckpt, d)
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return copy


def _atbsim_run(checkpoint: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """The stand-in model run on the checkpoint `checkpoint`."""
    from testkit import atbsim_bin

    return subprocess.run([str(atbsim_bin(0)), "run", "--weights", str(checkpoint), *args],
                          capture_output=True, text=True, timeout=HANG, **kwargs)


def _safetensors(base: Path):
    copies = _checkpoint_copies(base)

    def check(which: str, content: bytes) -> None:
        with copies() as d:
            (d / ("model.safetensors" if which == "header" else "config.json")).write_bytes(content)
            res = _atbsim_run(d, "--decode-steps", "1", preexec_fn=_limit_memory)
            assert res.returncode in (0, 2), (res.returncode, res.stderr[-2000:])
            if res.returncode == 2:
                assert res.stderr.startswith("atbsim: --weights: "), res.stderr[-2000:]
    return check


# ---- nonregular-files ----

PLACES = {  # place -> (file below the dump, commands that read it)
    "bin": ("atb_dump_data/data/0_4711/0/1_Layer/1_Linear/after/outtensor0.bin",
            [["replay", "{t}", "--all"], ["compare", "-gp", "{g}", "-tp", "{t}", "-o", "{o}/c.csv"],
             ["convert", "{t}/atb_dump_data/data/0_4711/0", "-o", "{o}/npy"], ["stats", "{t}"],
             ["report", "{t}", "--golden", "{g}", "-o", "{o}/r.html"]]),
    "op_param": ("atb_dump_data/data/0_4711/0/1_Layer/1_Linear/op_param.json",
                 [["replay", "{t}", "--all"]]),
    "csv": ("atb_dump_data/data/0_4711/0/statistic.csv",
            [["stats", "{t}"], ["compare", "-gp", "{g}", "-tp", "{t}", "-o", "{o}/c.csv"]]),
    "marker": ("atb_dump_data/data/0_4711/0/ROUND_COMPLETE.json", [["stats", "{t}"],
                                                                    ["replay", "{t}", "--all"]]),
    "graph": ("atb_dump_data/info/layer/0_4711/Layer_1.json", [["stats", "{t}"]]),
    "meta": ("atb_dump_data/manifest/_manifest.json", [["stats", "{t}"],
                                                   ["query", "{t}", "SELECT 1 FROM tensors"]]),
}
KINDS = ["fifo", "/dev/zero", "/dev/null"]


def _plant(path: Path, kind: str) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(kind)


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], capture_output=True,
                          text=True, timeout=HANG)


def _nonregular(base: Path):
    golden = small_model(base / "g")
    assert cli("index", golden)[0] == 0
    count = [0]

    def check(place: str, kind: str, which: int) -> None:
        count[0] += 1
        t, o = base / f"t{count[0]}", base / f"o{count[0]}"
        o.mkdir()
        try:
            shutil.copytree(golden, t, symlinks=True)
            rel, commands = PLACES[place]
            _plant(t / rel, kind)
            args = [a.format(t=t, g=golden, o=o) for a in commands[which % len(commands)]]
            res = _run(args)  # a hang raises TimeoutExpired: a finding
            assert "Traceback" not in res.stderr, res.stderr[-2000:]
        finally:
            shutil.rmtree(t, ignore_errors=True)
            shutil.rmtree(o, ignore_errors=True)
    return check


def _mapping_and_checkpoint_files(base: Path):
    """The files a user names (the mapping) and a checkpoint holds, as nonregular."""
    copies = _checkpoint_copies(base)

    def check(name: str, kind: str) -> None:
        with copies() as d:
            if name == "mapping":
                _plant(d / "m.yaml", kind)
                code = ("import sys\nfrom msprobe_atb.offline.compare.torch_mapping import "
                        "read_mapping\ntry:\n    read_mapping(sys.argv[1])\nexcept ValueError as e:"
                        "\n    print(e)\n")
                res = subprocess.run([sys.executable, "-c", code, str(d / "m.yaml")],
                                     capture_output=True, text=True, timeout=HANG)
                assert not res.stderr and "not a regular file" in res.stdout, res
            else:
                _plant(d / name, kind)
                res = _atbsim_run(d)
                assert res.returncode == 2 and "not a regular file" in res.stderr, res.stderr
    return check


PROPERTIES = {
    "mapping-yaml": (_mapping, mapping_texts),
    "query-sql": (_query, _sql_inputs),
    "safetensors": (_safetensors, checkpoint_files),
    "nonregular-files": (_nonregular, lambda: st.tuples(
        st.sampled_from(sorted(PLACES)), st.sampled_from(KINDS), st.integers(0, 4))),
    "nonregular-user-files": (_mapping_and_checkpoint_files, lambda: st.tuples(
        st.sampled_from(["mapping", "config.json", "model.safetensors"]),
        st.sampled_from(KINDS))),
}
DEFAULT = {"mapping-yaml": 1000, "query-sql": 1000, "safetensors": 300,
           "nonregular-files": 200, "nonregular-user-files": 30}


def run(name: str, examples: int, derandomize: bool = False) -> tuple[int, list[BaseException]]:
    make, inputs = PROPERTIES[name]
    return run_in_tmp(name, make, inputs(), examples, derandomize)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=None, help="inputs per target (default: "
                    + ", ".join(f"{n} {k}" for k, n in DEFAULT.items()) + ")")
    ap.add_argument("targets", nargs="*", default=list(PROPERTIES), help="default: all")
    args = ap.parse_args()
    return run_targets(args.targets, lambda name: run(name, args.examples or DEFAULT[name]))


if __name__ == "__main__":
    raise SystemExit(main())
