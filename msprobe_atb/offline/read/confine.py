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

Checks are cached per directory (one listing each, for its links), so a table
of N files in D directories costs D listings and no call per file.
"""

from __future__ import annotations

import os

from msprobe_atb.tree.names import os_path, text_of


class Confinement:
    def __init__(self, root: str | os.PathLike):
        # the root as named (paths are checked by name against it) and as it
        # resolves (a link on the way is checked against that)
        self.root = os.path.normpath(os.path.abspath(root))
        self.real = os.path.realpath(root)
        self._named = self.root.rstrip("/") + "/"
        self._resolved = self.real.rstrip("/") + "/"
        self._dirs: dict[str, bool] = {self.root: True}
        self._link_names: dict[str, frozenset[str]] = {}

    def _links(self, d: str) -> frozenset[str]:
        """The names of the symbolic links in directory `d` (one listing per dir)."""
        names = self._link_names.get(d)
        if names is None:
            try:
                with os.scandir(d) as it:
                    names = frozenset(e.name for e in it if e.is_symlink())
            except OSError:  # missing or unreadable: the reader says so when it opens
                names = frozenset()
            self._link_names[d] = names
        return names

    def _resolves_under(self, path: str) -> bool:
        real = os.path.realpath(path)
        return real == self.real or real.startswith(self._resolved)

    def _dir_ok(self, d: str) -> bool:
        todo = []
        while d not in self._dirs:
            todo.append(d)
            d = os.path.dirname(d)
        ok = self._dirs[d]
        for d in reversed(todo):
            parent, _, name = d.rpartition("/")
            ok = ok and (name not in self._links(parent) or self._resolves_under(d))
            self._dirs[d] = ok
        return ok

    def allows(self, path: str | os.PathLike) -> str | None:
        """The normalised absolute path if it stays under the root, else None.
        A relative path is taken relative to the root."""
        p = os.path.normpath(os.path.join(self.root, os.fspath(path)))
        if not p.startswith(self._named):
            if not p.startswith(self._resolved):
                return None
            p = self.root + p[len(self.real):]  # named by the resolved root
        d, _, name = p.rpartition("/")
        if not self._dir_ok(d) or (name in self._links(d) and not self._resolves_under(p)):
            return None
        return p

    def allows_text(self, path: str) -> str | None:
        """`allows` for a path of a tensor table (tree/names.py's text form): the
        file system is asked with its bytes, the answer is in the text form too."""
        p = self.allows(os_path(path))
        return None if p is None else text_of(p)

    def refusal(self, path: str) -> str:
        """Why `allows_text` refused a path (tree/names.py's text form): by its name,
        or by a symbolic link on its way that resolves elsewhere."""
        p = os.path.normpath(os.path.join(self.root, os_path(path)))
        if p.startswith((self._named, self._resolved)):
            return (f"refused: a link out of the dump root {self.root} "
                    f"(to {text_of(os.path.realpath(p))})")
        return f"refused: path {path!r} leaves the dump root {self.root}"

    def plain_dir(self, d: str) -> bool:
        """`d` (normalised, absolute) lies under the root, resolves under it, and
        holds no symbolic link: every file named in it is allowed as it is."""
        return d.startswith(self._named) and self._dir_ok(d) and not self._links(d)

    def confine(self, paths):
        """A polars Series of table paths (text form), each normalised and absolute
        (relative ones are taken from the root), or null where it leaves the root.
        The common case costs one check per directory: an absolute, normalised
        path without escapes in a plain directory (plain_dir) is kept as it is;
        the others are checked one by one."""
        import polars as pl

        frame = paths.rename("p").to_frame().with_row_index("_i")
        p = pl.col("p")
        frame = frame.with_columns(
            p.str.replace(r"/[^/]*$", "").alias("d"),
            (p.str.contains("/.", literal=True) | p.str.contains("//", literal=True)
             | p.str.contains("\\", literal=True) | ~p.str.starts_with("/")).alias("odd"))
        dirs = frame.filter(~pl.col("odd")).get_column("d").unique().to_list()
        plain = [d for d in dirs if d is not None and self.plain_dir(d)]
        fast = ~pl.col("odd") & pl.col("d").is_in(plain)
        out = frame.select(pl.when(fast).then(p)).to_series()
        slow = frame.filter(p.is_not_null() & ~fast.fill_null(False))
        if slow.height:
            out = out.scatter(slow.get_column("_i"), pl.Series(
                [self.allows_text(x) for x in slow.get_column("p").to_list()], dtype=pl.Utf8))
        return out.rename(paths.name)


REFUSED = "refused"  # the tensor table's status of a row whose path leaves the root


def refuse_outside(df, box: Confinement, problems: list[str]):
    """The tensor table `df` with each `path` normalised, and the rows whose path
    leaves the root refused: path cleared, status REFUSED, the path in the note.
    They are counted and named per round dir in `problems`."""
    import polars as pl

    out = df.with_columns(box.confine(df.get_column("path")).alias("_full"))
    bad = pl.col("path").is_not_null() & pl.col("_full").is_null()
    out = out.with_columns(pl.when(bad).then(pl.col("path")).alias("_why"))
    why = {p: box.refusal(p) for p in out.get_column("_why").drop_nulls().unique()}
    out = out.with_columns(pl.col("_why").replace_strict(why, default=None, return_dtype=pl.Utf8))
    for (rd,), rows in out.filter(bad).group_by("round_dir", maintain_order=True):
        problems.append(f"{rd}: {rows.height} row(s) {rows.get_column('_why')[0]}, e.g. "
                        f"{rows.get_column('path')[0]!r}")
    return out.with_columns(
        pl.when(bad).then(pl.lit(REFUSED)).otherwise(pl.col("status")).alias("status"),
        pl.coalesce("_why", "note").alias("note"),
        pl.col("_full").alias("path")).drop("_full", "_why")
