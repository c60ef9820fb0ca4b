"""`msprobe-atb query DIR... "SQL"`: SQL over the manifests of several dumps (one
per node), with DuckDB embedded. The view `tensors` holds every manifest row of
every given dump, with the partition columns `host`, `device`, `pid` and
`dump_root` (so `dump_root || '/' || path` names a tensor's file; a name that is
not UTF-8 is there in the text form of tree/names.py, which `os_path()` turns
back into the file's path).

It reads exactly the parts each manifest owns (read/manifest_parts.py): a planted,
left-over, linked or unreadable file is skipped and named, never counted twice.
A part that fails only when the query reads its data (a flipped bit) is
skipped, named, and the query run again without it. What a dump lost, and the
rows of its record logs its manifest lacks (a full disk kept them out), are said
as `stats` says them: the answer covers only the manifest's rows. File names go to DuckDB with
its glob characters escaped, so a name is never read as a pattern.

The query is read-only over the dumps it was given: only SELECT (with WITH, DESCRIBE,
SHOW, ...) and EXPLAIN statements run; any other (COPY, ATTACH, INSTALL, LOAD,
EXPORT, CREATE, SET, ...) is refused by name before anything runs. DuckDB's access
to files is limited to the dump roots (`allowed_directories`, then
`enable_external_access` off and the configuration locked), so no statement reads
another file or another dump, and no extension is installed or loaded."""

from __future__ import annotations

import datetime as _dt
import json
import math
import re

from msprobe_atb.tree.csvfmt import is_number
from msprobe_atb.tree.manifest import PARTITION_TYPES

from ..read.layout import DumpNotFound, find_layout
from ..read.losses import format_losses, losses_summary
from ..read.manifest_parts import owned_parts


class NoManifest(DumpNotFound):
    pass


class Refused(ValueError):
    """A statement or a file access `query` does not do; one line, naming it."""


READ_ONLY = {"SELECT", "EXPLAIN"}  # duckdb's StatementType names


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _literal(path: str) -> str:
    """`path` as a DuckDB file pattern that matches only itself."""
    return re.sub(r"[*?\[]", lambda m: f"[{m.group(0)}]", path)


def manifest_files(dirs: list[str], problems: list[str]) -> tuple[list[str], list[str]]:
    """(the manifest parts to read, the dump roots they are in)."""
    files: list[str] = []
    roots: list[str] = []
    for d in dirs:
        root = find_layout(d).root
        found = owned_parts(root, problems) if root else []
        if not found:
            behind = losses_summary(find_layout(d))["derived_behind"] if root else ""
            raise NoManifest(f"{d}: no manifest (atb_dump_data/manifest) with a readable "
                             "part; " + (f"INCOMPLETE: {behind}" if behind else
                                         f"make one with `msprobe-atb index {d}`"))
        files += found
        roots.append(str(root))
    return files, roots


def check_read_only(con, sql: str) -> None:
    """Refuses (Refused) a text holding any statement but a read; nothing has run."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as e:
        raise ValueError(f"query failed: {_first_line(e)}") from None
    for st in statements:
        kind = str(st.type).rpartition(".")[2]
        if kind not in READ_ONLY:
            word = (st.query.split() or [kind])[0].upper()
            raise Refused(f"refused: a {word} statement; query only reads the dumps it was "
                          "given (SELECT, WITH, DESCRIBE, SHOW, EXPLAIN)")


def confine(con, roots: list[str]) -> None:
    """From now on the connection opens files under `roots` only, and no setting
    can change (see the module's doc)."""
    allowed = [r.rstrip("/") + "/" for r in roots]
    allowed += [_literal(r) for r in allowed if _literal(r) != r]  # as the view names them
    con.execute(f"SET allowed_directories = [{', '.join(map(_quote, allowed))}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [""])[0]


def create_view(con, files: list[str]) -> None:
    """The `tensors` view over the manifest files (DuckDB reads their footers here)."""
    types = ", ".join(f"{_quote(k)}: {v}" for k, v in PARTITION_TYPES.items())
    con.execute(
        "CREATE VIEW tensors AS SELECT * EXCLUDE (filename), "
        "regexp_replace(filename, '/manifest/host=[^/]*/device=[^/]*/pid=[^/]*/[^/]*$', '') "
        f"AS dump_root FROM read_parquet([{', '.join(_quote(_literal(f)) for f in files)}], "
        f"hive_partitioning = true, hive_types = {{{types}}}, union_by_name = true, "
        "filename = true)")


def _cell(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (_dt.datetime, _dt.date)):
        return v.isoformat()
    if isinstance(v, list):
        return [_cell(x) for x in v]
    return v


def _text(v) -> str:
    v = _cell(v)
    if v is None:
        return ""
    if isinstance(v, list):
        return "x".join(map(str, v))
    return str(v)


def render(columns: list[str], rows: list[tuple], fmt: str) -> str:
    if fmt == "json":
        return json.dumps([{c: _cell(v) for c, v in zip(columns, r)} for r in rows], indent=1)
    if fmt == "csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        w.writerows([[_text(v) for v in r] for r in rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_text(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "  ".join
    out = [line(c.ljust(w) for c, w in zip(columns, widths)),
           line("-" * w for w in widths)]
    out += [line(v.rjust(w) if is_number(v) else v.ljust(w) for v, w in zip(r, widths))
            for r in cells]
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def _unreadable(con, files: list[str]) -> list[str]:
    """The files DuckDB cannot decode in full (every column of every row)."""
    import duckdb

    bad = []
    for f in files:
        try:
            con.execute(f"SELECT max(hash(t)) FROM read_parquet({_quote(_literal(f))}) t")
        except duckdb.Error:
            bad.append(f)
    return bad


def _losses(con, dirs: list[str], roots: list[str], problems: list[str]) -> None:
    """What each dump lost, and the record-log rows its manifest lacks (a full disk
    kept them out, or they are not built yet), as the other tools say it
    (read/losses.py): the answer covers only the manifest's rows."""
    for d, root in zip(dirs, roots):
        s = losses_summary(find_layout(d))
        if not (s["derived_behind"] or s["lost"] or s["params_lost"]):
            continue
        (rows,) = con.execute("SELECT count(*) FROM tensors WHERE dump_root = ?",
                              [root]).fetchone()
        problems += [f"{root}: {line.strip()}" for line in format_losses(s, rows)]


def run(dirs: list[str], sql: str, fmt: str = "table",
        problems: list[str] | None = None) -> str:
    """The query's rows rendered in `fmt`; what was skipped goes to `problems`."""
    import duckdb

    problems = [] if problems is None else problems
    files, roots = manifest_files(dirs, problems)
    while True:
        con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                     "autoload_known_extensions": False})
        try:
            check_read_only(con, sql)
            confine(con, roots)
            create_view(con, files)  # a footer DuckDB refuses fails here, before the query
            cur = con.execute(sql)
            if cur is None or cur.description is None:  # a statement without rows
                return ""
            columns = [d[0] for d in cur.description]
            out = render(columns, cur.fetchall(), fmt)
            _losses(con, dirs, roots, problems)
            return out
        except duckdb.PermissionException as e:
            raise Refused(f"refused: {_first_line(e).removeprefix('Permission Error: ')}; "
                          "query reads only the dumps it was given") from None
        except duckdb.Error as e:
            bad = [f for f in files if f in str(e)] or _unreadable(con, files)
            if not bad or len(bad) == len(files):
                raise ValueError(f"query failed: {_first_line(e)}") from None
            for f in bad:
                problems.append(f"{f}: unreadable Parquet ({str(e).splitlines()[0]}); skipped")
                files.remove(f)
        finally:
            con.close()
