"""The Parquet manifest on real dumps (the stand-in ATB under the real probe):
the offline table reads alike from the manifest and from the CSVs, `index`
makes one for a dump without it (an msProbe-style tree: statistic.csv and .bin
files only), and `query` answers SQL over it."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest

from msprobe_atb.cli import main
from msprobe_atb.offline import open_dump
from msprobe_atb.offline.compare.dumps import compare_dumps

IGNORED = ["source", "round_dir"]  # where a row was read from


def run_cli(*args: str) -> tuple[int, str]:
    """`msprobe-atb ARGS` in-process; (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(args))
    return rc, out.getvalue()


def copy_of(dump: Path, tmp_path: Path) -> Path:
    """A copy of a session's dump, for a test that moves its manifest: the session's
    dumps are read by every pytest-xdist worker at once."""
    return Path(shutil.copytree(dump, tmp_path / dump.name, symlinks=True))


def without_manifest(dump_root: Path):
    """Context: the manifest moved aside, so the CSVs are read."""
    class _Aside:
        def __enter__(self):
            self.src, self.dst = dump_root / "manifest", dump_root.parent / "manifest.aside"
            self.src.rename(self.dst)

        def __exit__(self, *exc):
            self.dst.rename(self.src)

    return _Aside()


@pytest.mark.parametrize("which", ["injected", "stats"])
def test_manifest_and_csvs_give_the_same_table(real_dumps, stats_dump, which, tmp_path):
    out = copy_of(real_dumps["injected"] if which == "injected" else stats_dump, tmp_path)
    root = out / "atb_dump_data"
    from_manifest = open_dump(out)
    assert set(from_manifest.tensors.get_column("source")) == {"manifest"}
    with without_manifest(root):
        from_csv = open_dump(out)
    assert set(from_csv.tensors.get_column("source")) == {"csv"}
    assert from_manifest.tensors.drop(IGNORED).equals(from_csv.tensors.drop(IGNORED))
    assert from_manifest.problems == from_csv.problems == []


def test_a_csv_changed_after_the_manifest_wins(real_dumps, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(real_dumps["target"], out, symlinks=True)
    csv = next((out / "atb_dump_data" / "data").glob("*/0/statistic.csv"))
    lines = csv.read_text().splitlines()
    extra = csv.with_name("statistic_extra.csv")
    xlines = extra.read_text().splitlines()
    csv.write_text("\n".join(lines[:-1]) + "\n")  # the round's last row removed by hand
    extra.write_text("\n".join(xlines[:-1]) + "\n")
    t = open_dump(out).tensors
    r0 = t.filter(pl.col("round_dir") == str(csv.parent))
    assert set(r0.get_column("source")) == {"csv"} and r0.height == len(lines) - 2
    assert set(t.filter(pl.col("round_dir") != str(csv.parent)).get_column("source")) == {
        "manifest"}


def msprobe_style_copy(src: Path, dst: Path) -> Path:
    """A dump as msProbe leaves it: data/ with statistic.csv and .bin files only."""
    shutil.copytree(src / "atb_dump_data" / "data", dst / "atb_dump_data" / "data",
                    symlinks=True)
    for f in (dst / "atb_dump_data" / "data").rglob("*"):
        if f.name in ("statistic_extra.csv", "ROUND_COMPLETE.json"):
            f.unlink()
    return dst


def test_index_an_msprobe_style_dump_then_query_it(real_dumps, tmp_path, monkeypatch, capsys):
    dump = msprobe_style_copy(real_dumps["injected"], tmp_path / "ms")
    root = dump / "atb_dump_data"
    before = open_dump(dump).tensors
    rc, out = run_cli("query", str(dump), "SELECT 1")
    assert rc == 2 and "no manifest" in capsys.readouterr().err

    monkeypatch.setenv("MSPROBE_ATB_HOST", "node-7")
    rc, out = run_cli("index", str(dump))
    assert rc == 0 and f"manifest of {before.height} tensors" in out
    assert json.loads((root / "manifest" / "_manifest.json").read_text())["made_by"] == "index"
    after = open_dump(dump).tensors
    assert set(after.get_column("source")) == {"manifest"}
    # msProbe's CSVs have no sequence: each round's row order stands for it
    assert not before.get_column("seq_exact").any()
    assert after.drop(*IGNORED, "status").equals(before.drop(*IGNORED, "status"))
    # filter_level 1 stores duplicates as hard links: every header is a full tensor
    assert after.get_column("status").equals(before.get_column("status"))
    rc, _ = run_cli("index", str(dump))
    assert rc == 2  # already there: refused without --force

    files = str(root / "manifest" / "**" / "*.parquet")
    m = pl.scan_parquet(files, hive_partitioning=True).collect()
    assert m.get_column("host").unique().to_list() == ["node-7"]
    written = m.filter(pl.col("status") == "written").get_column("bytes")
    assert written.null_count() == 0 and written.min() > 0
    assert m.filter(pl.col("status") == "stub").height == 0
    con = duckdb.connect()
    n_bins = con.execute("SELECT count(*) FROM read_parquet(?, hive_partitioning = true) "
                         "WHERE path LIKE '%.bin'", [files]).fetchone()[0]
    assert n_bins == sum(1 for _ in (root / "data").rglob("*.bin"))

    # the first NaN/Inf per rank, as the README shows it
    sql = ("SELECT host, device, round, round_seq, op_name, io, index FROM tensors "
           # msProbe's CSVs have no NaN/Inf counts: then the statistics tell
           "WHERE coalesce(nan + pinf + ninf > 0, NOT (isfinite(max) AND isfinite(min) AND "
           "isfinite(norm))) AND ((stage = 'before' AND io = 'input') OR "
           "(stage = 'after' AND io = 'output')) "
           "QUALIFY row_number() OVER (PARTITION BY host, device ORDER BY round, round_seq) = 1")
    rc, out = run_cli("query", str(dump), sql, "--format", "json")
    assert rc == 0
    rows = json.loads(out)
    assert len(rows) == 1 and rows[0]["host"] == "node-7" and rows[0]["round"] == 0
    assert "Attention" in rows[0]["op_name"]
    rc, out = run_cli("query", str(dump), "SELECT count(*) AS n, min(max) AS lo FROM tensors",
                      "--format", "csv")
    assert rc == 0 and out.splitlines()[0] == "n,lo" and out.splitlines()[1].startswith(
        f"{before.height},")
    rc, out = run_cli("query", str(dump), "SELECT host, count(*) AS n FROM tensors GROUP BY 1")
    assert rc == 0 and "node-7" in out and f"{before.height}" in out and "(1 row)" in out
    rc, out = run_cli("query", str(dump), "SELECT nope FROM tensors")
    assert rc == 2


def test_stats_only_compare_reads_the_manifest(real_dumps, stats_dump, tmp_path):
    stats = copy_of(stats_dump, tmp_path)
    g, t = open_dump(real_dumps["golden"]), open_dump(stats)
    via_manifest = compare_dumps(g, t)
    with without_manifest(stats / "atb_dump_data"):
        via_csv = compare_dumps(open_dump(real_dumps["golden"]), open_dump(stats))
    assert via_manifest.rows.equals(via_csv.rows)
