"""compare's row pairing (compare/pairs.py) takes two shortcuts for speed: dumps
listing the same tensors in the same order pair row by row with no join (the
narrow stats-only path of a 1M-row compare), and keys are joined as 64-bit
hashes checked against the real keys. On real dumps (the stand-in ATB under the
real probe) each shortcut gives exactly the rows, verdicts, headline and scope
of the general way: a join on the real keys. A row without an op id (a damaged
CSV) pairs with nothing."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest
from offline_helpers import run_cli
from offline_synth import small_model

from msprobe_atb.offline.compare import pairs as compare_pairs
from msprobe_atb.offline.compare.dumps import compare_dumps, error_growth, first_divergence
from msprobe_atb.offline.read.table import open_dump


def _changed_copy(src, dst):
    """A copy of a statistics dump with the Norm of one tensor doubled in round 0's
    statistic.csv (newer than the manifest, so it wins over it)."""
    shutil.copytree(src, dst)
    csv = next((dst / "atb_dump_data/data").glob("*/0/statistic.csv"))
    rows = pl.read_csv(csv, infer_schema=False)
    k = rows.height // 2
    norm = float(rows.get_column("Norm")[k]) * 2
    rows = rows.with_columns(pl.when(pl.int_range(pl.len()) == k).then(pl.lit(repr(norm)))
                             .otherwise(pl.col("Norm")).alias("Norm"))
    rows.write_csv(csv)
    newest = max(p.stat().st_mtime for p in (dst / "atb_dump_data/manifest").rglob("*"))
    os.utime(csv, (newest + 1, newest + 1))
    return dst


def _general(monkeypatch) -> None:
    """Pair by joins on the real keys: no row-by-row shortcut, and every key hash
    the same (so the hash join's check fails and the keys themselves are joined)."""
    monkeypatch.setattr(compare_pairs, "_aligned", lambda gs, ts: False)
    monkeypatch.setattr(compare_pairs, "key_hash", lambda by: pl.lit(0, pl.UInt64))


def _headline(res):
    return (res.rows.group_by("verdict").len().sort("verdict").rows(), first_divergence(res),
            error_growth(res), vars(res.scope), res.process_pairs, res.unpaired)


@pytest.mark.parametrize("case", ["stats changed", "tensors vs stats", "3 layers by id",
                                  "tensor mode"])
def test_shortcuts_give_the_general_pairs(case, real_dumps, stats_dump, stats_dump_3_layers,
                                          tmp_path, monkeypatch):
    golden, target, kw = {
        "stats changed": (stats_dump, _changed_copy(stats_dump, tmp_path / "t"), {}),
        "tensors vs stats": (real_dumps["golden"], stats_dump, {}),
        "3 layers by id": (stats_dump_3_layers, stats_dump, {"pair_by_id": True}),
        "tensor mode": (real_dumps["golden"], real_dumps["injected"], {}),
    }[case]
    with monkeypatch.context() as m:
        if case == "stats changed":  # the narrow path: row by row, no join
            m.setattr(compare_pairs, "_join", None)
        fast = compare_dumps(open_dump(golden), open_dump(target), **kw)
    if case == "stats changed":
        assert set(fast.rows.get_column("mode")) == {"stats"}
        assert fast.count("fail") >= 1 and "norm " in first_divergence(fast)["reason"]
    else:
        assert fast.count("pass") > 0
    _general(monkeypatch)
    slow = compare_dumps(open_dump(golden), open_dump(target), **kw)
    assert fast.rows.equals(slow.rows)
    assert _headline(fast) == _headline(slow)


def test_a_hash_collision_falls_back_to_the_keys(monkeypatch):
    """Every key hashed alike: the pairs are still those of the real keys, the
    n-th occurrence of a key with the n-th, leftovers by the id key."""
    def table(keys, ids):
        n = len(keys)
        return pl.DataFrame({
            "dev_pid": ["0_1"] * n, "round": [0] * n, "key": keys, "seq": list(range(n)),
            "op_id": ids, "op_name": ["AddF16Kernel" if k == "x" else "L" for k in keys],
            "stage": ["after"] * n, "io": ["output"] * n, "index": ["0"] * n})

    g = table(["a", "b", "a", "x"], ["1", "2", "1", "9"])
    t = table(["b", "a", "c", "a", "y"], ["2", "1", "3", "1", "9"])
    t = t.with_columns(pl.when(pl.col("key") == "y").then(pl.lit("AddF32Kernel"))
                       .otherwise(pl.col("op_name")).alias("op_name"))
    want = None
    for collide in (False, True):
        if collide:
            monkeypatch.setattr(compare_pairs, "key_hash", lambda by: pl.lit(0, pl.UInt64))
        rp = compare_pairs.pair_rows(g, t, [("0_1", "0_1")], False)
        got = sorted(rp.select("gi", "ti").rows(), key=str)
        want = want or got
        assert got == want
    # a with a in order, b with b, x with y (names differ only in the dtype tag), c alone
    assert sorted(want, key=str) == sorted([(0, 1), (1, 0), (2, 3), (3, 4), (None, 2)],
                                           key=str)


@pytest.mark.parametrize("rows", ["runs", "shuffled"])
def test_take_is_a_gather(rows):
    """`take` by slices (rows mostly in order) or by a gather (too many runs) is
    exactly the gather, rows of nulls included."""
    n = 3 * compare_pairs.MAX_SLICES
    df = pl.DataFrame({"s": [f"op{i}" for i in range(n)], "x": [i / 3 for i in range(n)]})
    idx = list(range(n // 2, n)) + [None] * 5 + list(range(n // 2))
    if rows == "shuffled":
        idx = [None if i is None else (i * 7919) % n for i in idx]
    idx = pl.Series(idx, dtype=pl.UInt32)
    assert compare_pairs.take(df, idx).equals(df[idx])
    assert compare_pairs.take(df, idx[:0]).equals(df.clear())


def test_a_row_without_op_id_is_compared_alone(tmp_path):
    """A statistic.csv row with an empty Op Id cell (a damaged file) pairs with
    nothing and is said so; compare and stats do not fail on it."""
    for side in ("g", "t"):
        small_model(tmp_path / side, rounds=1, task="statistics")
        rd = tmp_path / side / "atb_dump_data/data/0_4711/0"
        for name in ("statistic.csv", "statistic_extra.csv"):
            lines = (rd / name).read_text().splitlines()
            cells = lines[3].split(",")
            cells[lines[0].split(",").index("Op Id")] = ""
            lines[3] = ",".join(cells)
            (rd / name).write_text("\n".join(lines) + "\n")
    res = compare_dumps(open_dump(tmp_path / "g"), open_dump(tmp_path / "t"))
    assert dict(res.rows.group_by("verdict").len().iter_rows()) == {
        "pass": 23, "golden-only": 1, "target-only": 1}
    alone = res.rows.filter(pl.col("verdict") != "pass")
    assert alone.get_column("op_id").null_count() == 2
    assert set(alone.get_column("op")) == {"Layer/Norm"}  # the op name path, all that is known
    rc, out = run_cli("compare", "-gp", str(tmp_path / "g"), "-tp", str(tmp_path / "t"),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 0, out
    assert run_cli("stats", str(tmp_path / "t"))[0] == 0
