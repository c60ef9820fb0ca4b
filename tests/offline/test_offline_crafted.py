"""Dump data must not steer the readers, on real dumps made by the
stand-in ATB under the real probe: a path from a manifest, a CSV or a stub that
leaves its dump root is refused and named; sizes claimed by a manifest are
bounded before they are read; `query` reads exactly the parts the manifest owns."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from offline_helpers import run_cli
from testkit import REPO

from msprobe_atb.cli import main
from msprobe_atb.offline import open_dump
from msprobe_atb.offline.compare.dumps import compare_dumps
from msprobe_atb.offline.read.dumpset import open_dumps
from msprobe_atb.offline.read.parquet_footer import FooterError, footer_sizes
from msprobe_atb.offline.read.parquet_footer import _Reader as _FooterReader

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

# Tensors in the stand-in's dump of offline_helpers.MODEL (the real_dumps fixture).
N_TENSORS = 788


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def part_dir(out: Path) -> Path:
    (d,) = (out / "atb_dump_data" / "manifest").glob("host=*/device=*/pid=*")
    return d


def the_part(out: Path) -> Path:
    (f,) = part_dir(out).glob("part-*.parquet")
    return f


def query(out: Path, sql: str, problems: list[str]) -> str:
    """`msprobe-atb query OUT SQL --format csv`: its output; its stderr lines
    (what it skipped, by name) are added to `problems`."""
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        rc = main(["query", str(out), sql, "--format", "csv"])
    assert rc == 0, se.getvalue()
    problems += se.getvalue().splitlines()
    return so.getvalue()


def count(out: Path, problems: list[str] | None = None) -> int:
    return int(query(out, "SELECT count(*) AS n FROM tensors",
                     [] if problems is None else problems).splitlines()[1])


# ---- paths from data stay inside the dump root ----

def test_a_manifest_path_into_another_dump_is_refused(real_dumps, tmp_path):
    """The manifest of a copy of `target` lists the golden dump's rows with paths
    `../../golden/...`: compare read golden on both sides and passed every tensor."""
    golden, target = real_dumps["golden"], real_dumps["injected"]
    evil = copy(target, tmp_path / "evil")
    shutil.copytree(golden, tmp_path / "golden")
    rows = pl.read_parquet(the_part(golden)).with_columns(
        (pl.lit("../../golden/atb_dump_data/") + pl.col("path")).alias("path"))
    rows.write_parquet(the_part(evil))
    dump = open_dump(evil)
    root = str(evil / "atb_dump_data") + "/"
    paths = dump.tensors.get_column("path").drop_nulls().to_list()
    assert paths and all(p.startswith(root) for p in paths)
    assert set(dump.tensors.get_column("source")) == {"csv"}  # its rounds: from the CSVs
    refused = [p for p in dump.problems if "leaves the dump root" in p]
    assert len(refused) == 2 and "'../../golden/atb_dump_data/data/" in refused[0]
    res = compare_dumps(open_dumps([str(tmp_path / "golden")]), open_dumps([str(evil)]), jobs=1)
    assert res.count("fail") > 0 and res.exit_code() == 1


def escape_csv_paths(out: Path, into: Path) -> None:
    """Every Tensor Path of `out`'s CSVs climbs out of its round dir into `into`."""
    escape = "../" * 8 + str(into).lstrip("/") + "/"
    for csv in (out / "atb_dump_data" / "data").glob("*/*/statistic.csv"):
        csv.write_text(re.sub(r"(atb_dump_data/data/[^/,]+/[^/,]+/)", r"\g<1>" + escape,
                              csv.read_text()))


def test_a_csv_tensor_path_leaving_the_root_is_refused(real_dumps, tmp_path):
    """A statistic.csv whose Tensor Paths climb out of the round dir made the
    readers open files anywhere; each such row is now refused by name and
    compare calls it unreadable (exit 1), never pass."""
    golden = real_dumps["golden"]
    evil = copy(golden, tmp_path / "evil")
    shutil.rmtree(evil / "atb_dump_data" / "manifest")
    escape_csv_paths(evil, golden / "atb_dump_data" / "data")
    dump = open_dump(evil)
    df = dump.tensors
    assert df.filter(pl.col("status") == "refused").height == df.height == N_TENSORS
    assert df.get_column("path").null_count() == df.height
    assert any("row(s) refused: path '" in p and "' leaves the dump root" in p
               for p in dump.problems)
    res = compare_dumps(open_dumps([str(golden)]), open_dumps([str(evil)]), jobs=1)
    assert res.count("pass") == 0 and res.count("unreadable") == N_TENSORS
    assert res.exit_code() == 1
    assert "leaves the dump root" in res.rows.get_column("reason")[0]
    rc, out = run_cli("stats", str(evil))
    assert f"refused {N_TENSORS}" in out


def test_a_bin_linked_out_of_the_root_is_refused_as_a_link(real_dumps, tmp_path):
    """A .bin that is a symbolic link to a file outside was once refused in
    words that did not say it was a link; they say so now, and where it leads."""
    evil = copy(real_dumps["injected"], tmp_path / "evil")
    root = evil / "atb_dump_data"
    victim = next(p for p in sorted(root.rglob("outtensor0*.bin")) if p.stat().st_nlink == 1)
    outside = tmp_path / "outside.bin"
    shutil.copy(victim, outside)
    victim.unlink()
    victim.symlink_to(outside)
    link = f"refused: a link out of the dump root {root} (to {outside})"
    dump = open_dump(evil)
    assert any(f"row(s) {link}, e.g. '{victim}'" in p for p in dump.problems), dump.problems
    assert any(f"round 0 {link}; that round is read from its CSVs" in p
               for p in dump.problems), dump.problems
    res = compare_dumps(open_dumps([str(real_dumps["injected"])]), open_dumps([str(evil)]),
                        jobs=1)
    assert res.count("unreadable") == 1 and res.exit_code() == 1
    assert res.rows.filter(pl.col("verdict") == "unreadable").get_column("reason")[0] \
        == f"target {link}"


def test_a_symlinked_round_dir_or_csv_is_not_read(real_dumps, tmp_path):
    """A process dir that is a link to another dump's, and a statistic.csv that is
    a link to another dump's, added that dump's rows."""
    golden, target = real_dumps["golden"], real_dumps["injected"]
    evil = copy(target, tmp_path / "evil")
    shutil.rmtree(evil / "atb_dump_data" / "manifest")
    (gproc,) = (golden / "atb_dump_data" / "data").iterdir()
    (evil / "atb_dump_data" / "data" / "7_1").symlink_to(gproc)
    csv = next((evil / "atb_dump_data" / "data").glob("0_*/1/statistic.csv"))
    csv.unlink()
    csv.symlink_to(gproc / "1" / "statistic.csv")
    dump = open_dump(evil)
    assert set(dump.tensors.get_column("dev_pid")) == {csv.parent.parent.name}
    assert dump.tensors.height == N_TENSORS  # round 1 from its .bin files
    assert any("7_1: a symbolic link" in p for p in dump.problems)
    assert any("statistic.csv: a symbolic link" in p for p in dump.problems)


def test_a_stub_leading_out_of_its_round_is_refused(real_dumps, tmp_path):
    """A stub's data= named a file of another dump; it was read as this tensor."""
    golden, target = real_dumps["golden"], real_dumps["injected"]
    evil = copy(target, tmp_path / "evil")
    dump = open_dump(evil)
    row = dump.tensors.filter(pl.col("status") == "bin").row(0, named=True)
    victim = Path(row["path"])
    other = next(golden.glob("atb_dump_data/data/*/*/" + victim.relative_to(
        Path(row["round_dir"])).as_posix()))
    victim.unlink()
    victim.write_text(f"$Version=1.0\n$Object.Count=0\n$Object.Length=0\ndtype=1\n"
                      f"format=2\ndims=1\ndata={os.path.relpath(other, victim.parent)}\n$End=1\n")
    from msprobe_atb.offline import BinFileError, load_bin
    with pytest.raises(BinFileError, match="outside its round dir"):
        load_bin(victim)


# ---- counts from data stay in their range ----

def nonfinite_tensors(out: Path) -> tuple[int, list[str]]:
    """`stats --json`: (tensors holding NaN/Inf, problems)."""
    rc, text = run_cli("stats", str(out), "--json")
    s = json.loads(text)
    return s["nonfinite_tensors"], s["problems"]


def test_counts_out_of_range_are_refused(real_dumps, tmp_path):
    """A manifest whose Inf tensors had `nan` = -inf count once made stats
    report fewer NaN/Inf tensors, no problem noted. Such a round is read from its
    CSVs, and a CSV row out of range has its counts taken as unknown."""
    truth, problems = nonfinite_tensors(real_dumps["injected"])
    assert truth > 0 and not problems
    evil = copy(real_dumps["injected"], tmp_path / "evil")
    inf = pl.col("pinf") + pl.col("ninf")
    rows = pl.read_parquet(the_part(evil))
    rows.with_columns(pl.when(inf > 0).then(-inf).otherwise(pl.col("nan")).alias("nan")
                      ).write_parquet(the_part(evil))
    n, problems = nonfinite_tensors(evil)
    assert n == truth
    assert any("round 0 refused: 'nan' count -" in p and "is negative; that round is read "
               "from its CSVs" in p for p in problems), problems
    # the CSV too: a count larger than the tensor's elements
    shutil.rmtree(evil / "atb_dump_data" / "manifest")
    extra = next((evil / "atb_dump_data" / "data").glob("*/0/statistic_extra.csv"))
    head, first, *rest = extra.read_text().splitlines()
    cells = first.split(",")
    cells[7] = str(int(cells[5]) + 1)  # Pos Inf Count past Element Count
    extra.write_text("\n".join([head, ",".join(cells), *rest]) + "\n")
    n, problems = nonfinite_tensors(evil)
    assert n == truth  # that tensor holds no Inf: its statistics say so
    assert any("the counts of 1 row(s) refused: 'pinf' count" in p
               and "is more than the tensor's" in p for p in problems), problems


# ---- sizes from data are bounded before they are read ----

# Opens a dump; prints its rows, its own peak memory in MB (VmHWM: the kernel's
# ru_maxrss would count the pytest pages it was forked from) and its problems.
PEAK = """
import re, sys
from msprobe_atb.offline import open_dump
d = open_dump(sys.argv[1])
hwm = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
print(d.tensors.height, int(hwm) // 1024)
for p in d.problems:
    print(p)
"""


def test_a_manifest_claiming_millions_of_rows_is_not_decoded(stats_dump, tmp_path):
    """A 1 MB part holding 3M copies of the dump's rows took stats to about 1 GB;
    its footer's row count is now checked against the dump's CSVs first."""
    evil = copy(stats_dump, tmp_path / "evil")
    part = the_part(evil)
    rows = pl.read_parquet(part)
    pl.concat([rows] * (3_000_000 // rows.height)).write_parquet(part)
    assert part.stat().st_size < 4 << 20
    r = subprocess.run([sys.executable, "-c", PEAK, str(evil)], capture_output=True,
                       text=True, cwd=REPO, check=True)
    height, peak_mb = map(int, r.stdout.split("\n")[0].split())
    assert height == rows.height
    assert "rows and" in r.stdout and "more than the" in r.stdout and "not read" in r.stdout
    assert peak_mb < 400, r.stdout


def test_manifest_cells_that_decompress_to_gigabytes_are_not_decoded(stats_dump, tmp_path):
    """Rows of the dump's own count whose op names are 400 KB each (zstd makes them
    a few hundred bytes): the reader decoded 300 MB and more before anything was
    checked. The footer's uncompressed size is checked against the CSVs first."""
    evil = copy(stats_dump, tmp_path / "evil")
    part = the_part(evil)
    rows = pl.read_parquet(part)
    rows.with_columns((pl.lit("a" * 400_000) + pl.int_range(pl.len()).cast(pl.Utf8))
                      .alias("op_name")).write_parquet(part)
    assert part.stat().st_size < 4 << 20
    r = subprocess.run([sys.executable, "-c", PEAK, str(evil)], capture_output=True,
                       text=True, cwd=REPO, check=True)
    height, peak_mb = map(int, r.stdout.split("\n")[0].split())
    assert height == rows.height
    assert "bytes, more than the" in r.stdout and "not read" in r.stdout
    assert peak_mb < 250, r.stdout


def test_a_manifest_cell_beyond_any_path_is_not_read(stats_dump, tmp_path):
    evil = copy(stats_dump, tmp_path / "evil")
    part = the_part(evil)
    pl.read_parquet(part).with_columns(pl.lit("x" * 5000).alias("op_name")).write_parquet(part)
    dump = open_dump(evil)
    assert set(dump.tensors.get_column("source")) == {"csv"}
    assert any("'op_name' cell longer than 4096 bytes" in p for p in dump.problems)


# ---- query reads exactly the parts the manifest owns ----

@pytest.mark.parametrize("plant", ["truncated", "empty", "random", "symlink", "glob-name"])
def test_query_skips_and_names_a_planted_part(real_dumps, tmp_path, plant):
    out = copy(real_dumps["injected"], tmp_path / "q")
    part = the_part(out)
    data = part.read_bytes()
    planted = part.with_name("part-00000001-L0.parquet")
    if plant == "truncated":
        planted.write_bytes(data[: len(data) // 2])
    elif plant == "empty":
        planted.write_bytes(b"")
    elif plant == "random":
        planted.write_bytes(os.urandom(len(data)))
    elif plant == "symlink":
        planted.symlink_to(the_part(real_dumps["golden"]))
    else:
        planted = part.with_name("part-*.parquet")
        planted.write_bytes(data)
    problems: list[str] = []
    assert count(out, problems) == N_TENSORS
    assert [p for p in problems if f"{planted}: " in p], problems


def test_query_survives_a_bit_flip_in_a_part(real_dumps, tmp_path):
    out = copy(real_dumps["injected"], tmp_path / "q")
    part = the_part(out)
    rows = pl.read_parquet(part)
    rows.head(400).write_parquet(part)
    second = part.with_name("part-00000001-L0.parquet")
    rows.slice(400).write_parquet(second, compression="uncompressed")
    data = bytearray(second.read_bytes())
    # flip bits in the path column's data (its text is stored as is: uncompressed)
    at = data.index(b"data/0_")
    for i in range(at, at + 2000, 7):
        data[i] ^= 0xFF
    second.write_bytes(bytes(data))
    problems: list[str] = []
    out_text = query(out, "SELECT count(*) AS n, count(DISTINCT path) AS p FROM tensors",
                     problems)
    n, _ = map(int, out_text.splitlines()[1].split(","))
    assert n in (400, N_TENSORS)  # the flipped part skipped and named, or its bytes still decode
    assert n == N_TENSORS or any(f"{second}: " in p for p in problems)


def test_query_does_not_count_a_copied_part_twice(real_dumps, tmp_path):
    out = copy(real_dumps["injected"], tmp_path / "q")
    part = the_part(out)
    shutil.copy(part, part.with_name("part-00000005-L0.parquet"))
    problems: list[str] = []
    assert count(out, problems) == N_TENSORS
    assert any("rows already in part-00000000-L0.parquet" in p for p in problems)


def test_query_after_a_kill_in_the_compaction_window(real_dumps, tmp_path):
    """tree/manifest.py writes a merged part before it removes its inputs: a kill
    in between leaves both, which query counted twice (and thrice with a second
    level). The merged part is taken, its inputs skipped."""
    out = copy(real_dumps["injected"], tmp_path / "q")
    part = the_part(out)
    rows = pl.read_parquet(part)
    part.unlink()
    step = -(-rows.height // 8)
    for i in range(8):  # the 8 inputs of a merge ...
        rows.slice(i * step, step).write_parquet(part.with_name(f"part-{i:08d}-L0.parquet"))
    rows.write_parquet(part.with_name("part-00000000-L1.parquet"))  # ... and its output
    (part.parent / "part-00000000-L0.parquet").unlink()  # the kill came mid-removal
    problems: list[str] = []
    assert count(out, problems) == N_TENSORS
    assert open_dump(out).tensors.height == N_TENSORS


def test_query_does_not_add_a_linked_manifest_dir(real_dumps, tmp_path):
    out = copy(real_dumps["injected"], tmp_path / "q")
    gpid = part_dir(real_dumps["golden"])
    (part_dir(out).parent / "pid=1").symlink_to(gpid)
    problems: list[str] = []
    assert count(out, problems) == N_TENSORS
    assert any("pid=1: not a manifest partition directory" in p for p in problems)
    man = out / "atb_dump_data" / "manifest"
    shutil.rmtree(man)
    man.symlink_to(real_dumps["golden"] / "atb_dump_data" / "manifest")
    assert main(["query", str(out), "SELECT count(*) FROM tensors"]) == 2


def test_query_of_a_dump_under_a_dir_with_glob_characters(real_dumps, tmp_path):
    out = copy(real_dumps["injected"], tmp_path / "a*b[1]?" / "q")
    assert count(out) == N_TENSORS


class _IntSpots(_FooterReader):
    """Walks a footer as footer_sizes does, noting where each integer's bytes are."""

    def __init__(self, buf: bytes):
        super().__init__(buf)
        self.spots: list[tuple[int, int]] = []

    def zigzag(self) -> int:
        start = self.pos
        v = super().zigzag()
        self.spots.append((start, self.pos))
        return v


_FILLS = (lambda n: bytes([0x80] * (n - 1) + [0]) if n > 1 else b"\0",  # zero
          lambda n: bytes([0xFE] + [0xFF] * (n - 2) + [0x7F]) if n > 1 else b"\x7e",  # big
          lambda n: bytes([0xFF] * (n - 1) + [0x7F]))  # negative


def footer_lies(data: bytes) -> list[bytes]:
    """The Parquet file `data` with one integer of its footer set to zero, to a large
    positive or to a negative value of its width (byte count kept, so the footer
    still parses): sizes, offsets, counts and types that lie, one per copy."""
    length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - length
    spy = _IntSpots(data[start:-8])
    spy.struct(0)
    return [data[:start + a] + fill(b - a) + data[start + b:]
            for a, b in spy.spots for fill in _FILLS]


def test_a_part_whose_footer_lies_is_skipped_by_name_never_a_panic(stats_dump, tmp_path):
    """Every lie of footer_lies. polars 2.1 panicked on several (a chunk's bytes past
    the file, a value count of 0): a BaseException that killed `stats` in a
    clean-clone CI's fuzz run. Each part is read or skipped and named; the rows
    come from the CSVs."""
    lies = footer_lies(the_part(stats_dump).read_bytes())
    assert len(lies) > 300
    evil = copy(stats_dump, tmp_path / "evil")
    part = the_part(evil)
    refused, accepted = [], []
    for lie in lies:
        part.write_bytes(lie)
        try:
            footer_sizes(part)
            accepted.append(lie)
        except FooterError as e:
            refused.append((lie, str(e)))
    said = " | ".join(why for _, why in refused)
    for lie_kind in ("lie outside", "values for", "rows, the file", "missing or negative"):
        assert lie_kind in said
    rows = open_dump(stats_dump).tensors.height
    rng = random.Random(0)
    for lie in rng.sample(accepted, 25) + [lie for lie, _ in rng.sample(refused, 10)]:
        part.write_bytes(lie)
        dump = open_dump(evil)  # a PanicException would end the test here
        assert dump.tensors.height == rows
    assert any(f"{part}: unreadable Parquet footer (" in p for p in dump.problems)


def test_query_skips_a_part_whose_footer_lies(real_dumps, tmp_path):
    """DuckDB refuses some footers that polars and footer_sizes accept, and it
    reads them when the view is made, before the query: `query` raised DuckDB's
    TProtocolException (a crafted-manifest fuzz finding). Now the part is named
    and skipped, and the other part's rows are counted."""
    out = copy(real_dumps["injected"], tmp_path / "q")
    part = the_part(out)
    rows = pl.read_parquet(part)
    rows.head(400).write_parquet(part)
    second = part.with_name("part-00000001-L0.parquet")
    rows.slice(400).write_parquet(second)
    lies = footer_lies(second.read_bytes())
    for lie in random.Random(0).sample(lies, 25):
        second.write_bytes(lie)
        problems: list[str] = []
        n = count(out, problems)
        assert n in (400, N_TENSORS)
        assert n == N_TENSORS or any(f"{second}: " in p for p in problems), problems
