"""`query` is read-only over the dumps it was given: no file outside
their roots is read or written, no statement but a read runs, and each refusal is
one line naming what was refused."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from offline_synth import small_model

from msprobe_atb.cli import main


def cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    base = tmp_path_factory.mktemp("q")
    one, other = small_model(base / "one"), small_model(base / "other", seed=1)
    for d in (one, other):
        assert cli("index", d)[0] == 0
    return one, other


def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir(exist_ok=True)
    (d / "secret.txt").write_text("the secret\n")
    return d


def test_a_read_of_the_dump_works(dumps):
    rc, out, err = cli("query", dumps[0], "SELECT count(*) AS n FROM tensors", "--format", "csv")
    assert (rc, out.strip()) == (0, "n\n48"), err


@pytest.mark.parametrize("sql,named", [
    ("SELECT content FROM read_text('{out}/secret.txt')", "{out}/secret.txt"),
    ("SELECT * FROM read_csv('/etc/passwd')", "/etc/passwd"),
    ("SELECT * FROM glob('{out}/*')", "{out}/*"),
    ("SELECT * FROM read_parquet('{other}/atb_dump_data/manifest/**/*.parquet')",
     "{other}/atb_dump_data/manifest"),
    ("SELECT * FROM read_text('{dump}/atb_dump_data/../../outside/secret.txt')", "secret.txt"),
])
def test_a_read_outside_the_dump_roots_is_refused(dumps, tmp_path, sql, named):
    out = outside(tmp_path)
    fill = {"out": out, "other": dumps[1], "dump": dumps[0]}
    rc, text, err = cli("query", dumps[0], sql.format(**fill))
    assert rc != 0 and "the secret" not in text and text == ""
    (line,) = err.strip().splitlines()
    assert "refused" in line and named.format(**fill) in line


@pytest.mark.parametrize("sql,word", [
    ("COPY (SELECT 1 AS x) TO '{out}/copied.csv'", "COPY"),
    ("COPY (SELECT 1 AS x) TO '{dump}/atb_dump_data/copied.csv'", "COPY"),
    ("ATTACH '{out}/attached.db' AS x; CREATE TABLE x.t AS SELECT 1", "ATTACH"),
    ("ATTACH '{dump}/atb_dump_data/attached.db' AS x", "ATTACH"),
    ("INSTALL httpfs", "INSTALL"),
    ("LOAD '{out}/ext.duckdb_extension'", "LOAD"),
    ("EXPORT DATABASE '{dump}/atb_dump_data/exported'", "EXPORT"),
    ("SELECT 1; COPY (SELECT 1) TO '{out}/second.csv'", "COPY"),
    ("SET enable_external_access = true", "SET"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
])
def test_a_statement_that_is_not_a_read_is_refused_by_name(dumps, tmp_path, sql, word):
    out = outside(tmp_path)
    before = {p: sorted(os.listdir(p)) for p in (out, dumps[0] / "atb_dump_data")}
    rc, text, err = cli("query", dumps[0], sql.format(out=out, dump=dumps[0]))
    assert rc != 0 and text == ""
    (line,) = err.strip().splitlines()
    assert f"refused: a {word} statement" in line
    assert before == {p: sorted(os.listdir(p)) for p in before}  # nothing was written


def test_reads_of_several_dumps_given_work(dumps):
    sql = "SELECT count(DISTINCT dump_root) AS roots FROM tensors"
    rc, out, err = cli("query", *dumps, sql, "--format", "csv")
    assert (rc, out.strip()) == (0, "roots\n2"), err
