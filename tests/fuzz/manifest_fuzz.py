"""The crafted-manifest fuzzer: real dumps made by the stand-in ATB under the real
probe, then, per input, a copy of the target dump with a few planted or mutated
manifest rows, part files, CSV paths or stubs, read by `stats`, `compare` (against
the golden dump), `report` and `query` in turn (the real CLI, in this process).
`make fuzz` runs it long (`python tests/fuzz/manifest_fuzz.py --inputs 200`),
`make test` briefly (test_manifest_fuzz.py). Prints "fuzz crafted-manifest: N inputs
tried, K findings".

Findings: a traceback (any exception out of the CLI); a hang (an input taking
longer than HANG_S); a file opened outside the dump roots given (every mutation
that names a path points into `other/`, a third dump beside them: an audit hook
sees every open by Python); unbounded memory (the process's peak RSS passing
MAX_RSS_MB above the RSS it started from: 3M planted rows once took a reader to 1 GB).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "offline")]

HANG_S = 120
MAX_RSS_MB = 900


def _reset_peak_rss() -> int:
    """Starts the process's peak RSS afresh (Linux: clear_refs 5) and returns the RSS
    in MB it starts from, so what tests before the fuzzer in the same process took
    (and still hold: a pytest worker runs many modules) does not count as its finding."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) // 1024 for line in f
                        if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0  # elsewhere the peak is the process's whole life's: still a bound


def _peak_rss_mb() -> int:
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) // 1024 for line in f
                        if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
READERS = ("stats", "compare", "report", "query")


class Hang(Exception):
    pass


# Files opened under the watched dir (the dump no reader may read), by Python's
# audit hook: installed once per process, idle while nothing is watched.
_WATCHED: list[str] = []
_OPENED: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if _WATCHED and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        p = os.fsdecode(args[0])
        if os.path.realpath(p).startswith(_WATCHED[0] + "/"):
            _OPENED.append(p)


def _watch(outside: str) -> None:
    if not _WATCHED and not getattr(sys, "_manifest_fuzz_hook", False):
        sys.addaudithook(_audit)
        sys._manifest_fuzz_hook = True
    _WATCHED[:] = [outside]


def _parts(root: Path) -> list[Path]:
    return sorted((root / "manifest").glob("host=*/device=*/pid=*/*.parquet"))


def _out_path(rng: random.Random, root: Path, other: Path) -> str:
    """A path into `other` as a manifest or CSV would spell it."""
    target = rng.choice(sorted(str(p) for p in (other / "atb_dump_data" / "data").rglob("*.bin")))
    return rng.choice([target, os.path.relpath(target, root), os.path.relpath(target, root)
                       .replace("../", "./../", 1), "data/" + "../" * rng.randint(1, 9)
                       + os.path.relpath(target, root)])


# ---- mutations: each changes the dump at `root` (its atb_dump_data) ----

def m_rows(rng, root, other):
    """Rewrite a manifest part's rows: paths out, repeated rows, long or odd cells."""
    import polars as pl

    parts = _parts(root)
    if not parts:
        return
    part = rng.choice(parts)
    df = pl.read_parquet(part)
    kind = rng.choice(["path", "repeat", "long", "round", "shape", "drop", "type"])
    if kind == "path":
        n = rng.randint(1, df.height)
        df = df.with_columns(pl.when(pl.int_range(pl.len()) < n).then(
            pl.lit(_out_path(rng, root, other))).otherwise(pl.col("path")).alias("path"))
    elif kind == "repeat":
        df = pl.concat([df] * rng.choice([2, 50, 4000]))
    elif kind == "long":
        col = rng.choice(["op_name", "op_id", "path", "note", "shape", "status"])
        df = df.with_columns(pl.lit("x" * rng.choice([300, 5000, 200_000])).alias(col))
    elif kind == "round":
        df = df.with_columns(pl.lit(rng.choice([-1, 2**62, 7])).alias("round"))
    elif kind == "shape":
        df = df.with_columns(pl.lit("x".join(["99999"] * rng.randint(1, 400))).alias("shape"))
    elif kind == "drop":
        df = df.drop(rng.choice(["path", "round", "round_seq", "status", "op_id"]))
    else:
        df = df.with_columns(pl.col("round").cast(pl.Utf8).alias("path"))
    df.write_parquet(part)


def m_bytes(rng, root, other):
    """Damage a part: truncate, empty, random bytes, flipped bits."""
    parts = _parts(root)
    if not parts:
        return
    part = rng.choice(parts)
    data = bytearray(part.read_bytes())
    kind = rng.choice(["truncate", "empty", "random", "flip"])
    if kind == "truncate":
        data = data[: rng.randrange(len(data))]
    elif kind == "empty":
        data = bytearray()
    elif kind == "random":
        data = bytearray(rng.randbytes(len(data)))
    else:
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    part.write_bytes(bytes(data))


def m_plant(rng, root, other):
    """Plant a part or directory: a copy, a glob name, links into `other`, left-overs."""
    import polars as pl

    parts = _parts(root)
    if not parts:
        return
    part = rng.choice(parts)
    kind = rng.choice(["copy", "glob", "link-part", "link-pid", "link-manifest", "leftover",
                       "link-out-dir"])
    oparts = _parts(other / "atb_dump_data")
    if kind == "copy":
        shutil.copy(part, part.with_name(f"part-{rng.randint(1, 99):08d}-L{rng.randint(0, 2)}"
                                         ".parquet"))
    elif kind == "glob":
        shutil.copy(part, part.with_name(rng.choice(["part-*.parquet", "part-?[0].parquet"])))
    elif kind == "link-part":
        part.with_name("part-00000042-L0.parquet").symlink_to(rng.choice(oparts))
    elif kind == "link-pid":
        (part.parent.parent / "pid=1").symlink_to(oparts[0].parent)
    elif kind == "link-manifest":
        shutil.rmtree(root / "manifest")
        (root / "manifest").symlink_to(other / "atb_dump_data" / "manifest")
    elif kind == "link-out-dir":
        (root / "data" / "9_1").symlink_to(next((other / "atb_dump_data" / "data").iterdir()))
    else:
        df = pl.read_parquet(part)
        step = -(-df.height // 8)
        for i in range(8):
            df.slice(i * step, step).write_parquet(part.with_name(f"part-{i:08d}-L0.parquet"))
        df.write_parquet(part.with_name("part-00000000-L1.parquet"))


def m_csv(rng, root, other):
    """Point statistic.csv Tensor Paths out of the dump, or link a CSV to another's."""
    csvs = sorted((root / "data").glob("*/*/statistic.csv"))
    if not csvs:
        return
    csv = rng.choice(csvs)
    if rng.random() < 0.3:
        csv.unlink()
        csv.symlink_to(rng.choice(sorted((other / "atb_dump_data" / "data")
                                         .glob("*/*/statistic.csv"))))
        return
    lines = csv.read_text().split("\n")
    for i in rng.sample(range(1, max(2, len(lines) - 1)), k=min(len(lines) - 2, 5)):
        cells = lines[i].split(",")
        if len(cells) >= 15:
            cells[-1] = _out_path(rng, root, other)
            lines[i] = ",".join(cells)
    csv.write_text("\n".join(lines))


def m_stub(rng, root, other):
    """Turn a .bin into a stub whose data= leads into `other`."""
    bins = sorted((root / "data").rglob("*.bin"))
    victim = rng.choice(bins)
    target = rng.choice(sorted((other / "atb_dump_data" / "data").rglob("*.bin")))
    victim.unlink()
    victim.write_text("$Version=1.0\n$Object.Count=0\n$Object.Length=0\ndtype=1\nformat=2\n"
                      f"dims=1\ndata={os.path.relpath(target, victim.parent)}\n$End=1\n")


MUTATIONS: tuple[Callable, ...] = (m_rows, m_bytes, m_plant, m_csv, m_stub)


# ---- the run ----

def make_dumps(base: Path) -> dict[str, Path]:
    from offline_helpers import INJECT, make_real_dump

    golden = make_real_dump(base / "golden", "fp32")
    # a third dump the readers must never read: a copy of the golden one
    return {"golden": golden, "target": make_real_dump(base / "target", "fp16", inject=INJECT),
            "other": shutil.copytree(golden, base / "other", symlinks=True)}


def _argv(reader: str, target: Path, golden: Path, work: Path) -> list[str]:
    if reader == "stats":
        return ["stats", str(target)]
    if reader == "compare":
        return ["compare", "-gp", str(golden), "-tp", str(target), "-o",
                str(work / "cmp.csv"), "--engine", "in-process"]
    if reader == "report":
        return ["report", str(target), "--golden", str(golden), "-o", str(work / "r.html"),
                "-j", "1"]
    return ["query", str(target), "SELECT count(*), count(DISTINCT path) FROM tensors"]


def run(inputs: int, seed: int, dumps: dict[str, Path] | None = None) -> tuple[int, list[str]]:
    """Tries `inputs` crafted dumps; returns (inputs tried, findings)."""
    from msprobe_atb.cli import main as cli

    rng = random.Random(seed)
    findings: list[str] = []
    tried = 0
    start_mb = _reset_peak_rss()
    with tempfile.TemporaryDirectory(prefix="fuzz-manifest-") as tmp:
        base = Path(tmp)
        dumps = dumps or make_dumps(base / "dumps")
        _watch(str(Path(os.path.realpath(dumps["other"]))))
        opened = _OPENED

        def alarm(*_):
            raise Hang()

        old = signal.signal(signal.SIGALRM, alarm)
        try:
            for i in range(inputs):
                work = base / f"in{i}"
                target = work / "target"
                shutil.copytree(dumps["target"], target, symlinks=True)
                chosen = rng.sample(MUTATIONS, k=rng.randint(1, 3))
                done = [m.__name__[2:] for m in chosen]
                for mutate in chosen:
                    # an earlier mutation may leave nothing for this one to act on
                    with contextlib.suppress(Exception):
                        mutate(rng, target / "atb_dump_data", dumps["other"])
                reader = READERS[i % len(READERS)]
                argv = _argv(reader, target, dumps["golden"], work)
                opened.clear()
                tried += 1
                what = f"input {i} (seed {seed}, {reader}, {'+'.join(done)})"
                signal.alarm(HANG_S)
                try:
                    with contextlib.redirect_stdout(io.StringIO()), \
                            contextlib.redirect_stderr(io.StringIO()):
                        cli(argv)
                except Hang:
                    findings.append(f"{what}: no answer within {HANG_S} s")
                except Exception as exc:  # a traceback for the user
                    findings.append(f"{what}: {type(exc).__name__}: {exc}")
                finally:
                    signal.alarm(0)
                if opened:
                    findings.append(f"{what}: read outside the dump roots: {opened[:3]}")
                grew = _peak_rss_mb() - start_mb
                if grew > MAX_RSS_MB:
                    findings.append(f"{what}: peak RSS {grew} MB above the {start_mb} MB it "
                                    f"started from (bound {MAX_RSS_MB} MB)")
                    break  # the peak stays: later inputs could not be told apart
                shutil.rmtree(work, ignore_errors=True)
        finally:
            signal.signal(signal.SIGALRM, old)
            _WATCHED.clear()
    return tried, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=200, help="crafted dumps to try")
    ap.add_argument("--seed", type=int, default=None, help="default: time-based")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    tried, findings = run(args.inputs, seed)
    for f in findings:
        print(f, file=sys.stderr)
    print(f"fuzz crafted-manifest: {tried} inputs tried, {len(findings)} findings", flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
