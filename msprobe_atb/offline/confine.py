"""Paths that dump data names stay inside their own dump root.

A manifest's `path`, a statistic.csv `Tensor Path` and a stub's `data=` are data:
a crafted or corrupted file can name `../../other/atb_dump_data/...` or an
absolute path, and a symbolic link planted in the tree can lead out of it; a
reader following them would read another dump's tensors as this one's (and
`compare` would pass a dump against itself). A reader asks `Confinement.allows`
before it uses such a path: after `.` and `..` are resolved by name, the path
must lie under the root, and every symbolic link on its way (a directory or the
file itself) must resolve under the root too. The answer is the normalised path,
which is what the reader then opens (so a `..` after a link cannot lead
elsewhere), or None: the row is refused, counted and named.

Checks are cached per directory, so a table of N files costs one lstat per file
and one per directory.
"""

from __future__ import annotations

import os
import stat

from msprobe_atb.tree.names import os_path, text_of


class Confinement:
    def __init__(self, root: str | os.PathLike):
        # the root as named (paths are checked by name against it) and as it
        # resolves (a link on the way is checked against that)
        self.root = os.path.normpath(os.path.abspath(root))
        self.real = os.path.realpath(root)
        self._dirs: dict[str, bool] = {self.root: True}

    def _under(self, path: str) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/")
                   for r in (self.root, self.real))

    def _resolves_under(self, path: str) -> bool:
        """`path` (lexically under the root) is no link, or a link leading under it."""
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                return True
        except OSError:  # missing: the reader says so when it opens it
            return True
        real = os.path.realpath(path)
        return real == self.real or real.startswith(self.real.rstrip("/") + "/")

    def _dir_ok(self, d: str) -> bool:
        todo = []
        while d not in self._dirs:
            todo.append(d)
            d = os.path.dirname(d)
        ok = self._dirs[d]
        for d in reversed(todo):
            ok = ok and self._resolves_under(d)
            self._dirs[d] = ok
        return ok

    def allows(self, path: str | os.PathLike) -> str | None:
        """The normalised absolute path if it stays under the root, else None.
        A relative path is taken relative to the root."""
        p = os.path.normpath(os.path.join(self.root, os.fspath(path)))
        if p in (self.root, self.real) or not self._under(p):
            return None
        if not p.startswith(self.root.rstrip("/") + "/"):  # named by the resolved root
            p = self.root + p[len(self.real):]
        if not self._dir_ok(os.path.dirname(p)) or not self._resolves_under(p):
            return None
        return p


    def allows_text(self, path: str) -> str | None:
        """`allows` for a path of a tensor table (tree/names.py's text form): the
        file system is asked with its bytes, the answer is in the text form too."""
        p = self.allows(os_path(path))
        return None if p is None else text_of(p)


REFUSED = "refused"  # the tensor table's status of a row whose path leaves the root


def refuse_outside(df, box: Confinement, problems: list[str]):
    """The tensor table `df` with each `path` normalised, and the rows whose path
    leaves the root refused: path cleared, status REFUSED, the path in the note.
    They are counted and named per round dir in `problems`."""
    import polars as pl

    paths = df.get_column("path").to_list()
    full = [None if p is None else box.allows_text(p) for p in paths]
    out = df.with_columns(pl.Series("_full", full, pl.Utf8))
    bad = pl.col("path").is_not_null() & pl.col("_full").is_null()
    refused = out.filter(bad)
    for (rd,), rows in refused.group_by("round_dir", maintain_order=True):
        problems.append(f"{rd}: {rows.height} row(s) refused: their file path leaves the dump "
                        f"root {box.root}, e.g. {rows.get_column('path')[0]!r}")
    return out.with_columns(
        pl.when(bad).then(pl.lit(REFUSED)).otherwise(pl.col("status")).alias("status"),
        pl.when(bad).then(pl.lit("refused: path ") + pl.col("path")
                          + pl.lit(f" leaves the dump root {box.root}"))
        .otherwise(pl.col("note")).alias("note"),
        pl.col("_full").alias("path")).drop("_full")
