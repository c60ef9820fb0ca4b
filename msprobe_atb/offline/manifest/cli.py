"""Subcommands `index` and `query` (the Parquet manifest), registered into
`msprobe-atb`. Heavy imports wait until a command runs."""

from __future__ import annotations

import sys


def _err(cmd: str, msg: str) -> int:
    print(f"msprobe-atb {cmd}: error: {msg}", file=sys.stderr)
    return 2


def cmd_index(a) -> int:
    from tqdm import tqdm

    from ..read.layout import DumpNotFound
    from .index import index_dump

    rc = 0
    for d in a.dirs:
        bar = tqdm(desc=f"index {d}", unit="file", disable=None, file=sys.stderr, leave=False)
        try:
            root, rows, files = index_dump(d, host=a.host, force=a.force, progress=bar.update)
        except (DumpNotFound, FileExistsError, OSError) as e:
            rc = _err("index", str(e))
            continue
        finally:
            bar.close()
        print(f"{root}: manifest of {rows} tensors in {files} file(s): {root / 'manifest'}")
    return rc


def cmd_query(a) -> int:
    from ..read.layout import DumpNotFound
    from .query import run

    problems: list[str] = []
    try:
        print(run(a.dirs, a.sql, a.format, problems))
    except (DumpNotFound, ValueError) as e:
        return _err("query", str(e))
    finally:
        for p in problems:
            print(f"msprobe-atb query: {p}", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "index", help="build the Parquet manifest of dumps that lack one (msProbe's too)",
        description="Writes <dump root>/manifest (one row per tensor, hive partitions "
        "host/device/pid) from statistic.csv, statistic_extra.csv and the .bin headers. "
        "Dumps made by msprobe-atb have one already (`rebuild` recreates it from the "
        "record logs).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="output root or atb_dump_data")
    p.add_argument("--host", help="host name for the manifest (default: $MSPROBE_ATB_HOST, "
                   "else the one an earlier manifest names, else this machine's)")
    p.add_argument("--force", action="store_true", help="replace an existing manifest")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "query", help="SQL (DuckDB) over the manifests of one or more dumps",
        description="Runs SQL over the view `tensors`: every manifest row of every given "
        "dump (one per node), with host, device, pid and dump_root. Example: msprobe-atb "
        "query node1/ node2/ \"SELECT host, device, min(round) FROM tensors WHERE nan > 0 "
        "GROUP BY ALL\"")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="dump roots (output root or atb_dump_data), one per node")
    p.add_argument("sql", help="the SQL; the view is `tensors`")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="output: an aligned table (default), CSV, or a JSON list of rows")
    p.set_defaults(func=cmd_query)
