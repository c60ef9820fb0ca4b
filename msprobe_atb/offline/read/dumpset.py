"""Several dump roots opened as one dump: one `--output` per node (each on its
node's disk or on shared storage) holding different processes, compared as a
whole with `compare -gp DIR... -tp DIR...`."""

from __future__ import annotations

import polars as pl

from .layout import DumpLayout
from .table import Dump, open_dump


def open_dumps(paths: list[str], fill_stats: bool = False) -> Dump:
    """One Dump over every given root; a process dir found in two roots is an
    error (ValueError naming both), since its tensors could not be told apart."""
    dumps = [open_dump(p, fill_stats=fill_stats) for p in paths]
    if len(dumps) == 1:
        return dumps[0]
    owner: dict[str, str] = {}
    for p, d in zip(paths, dumps):
        for proc in d.tensors.get_column("dev_pid").unique().to_list():
            if proc in owner:
                raise ValueError(f"process dir {proc} is in both {owner[proc]} and {p}: "
                                 "give each node's dump once (they must hold different "
                                 "processes)")
            owner[proc] = p
    layout = DumpLayout(given=dumps[0].layout.given, root=None,
                        rounds=[r for d in dumps for r in d.layout.rounds])
    return Dump(layout, pl.concat([d.tensors for d in dumps], how="diagonal_relaxed"),
                [x for d in dumps for x in d.problems], [d.layout for d in dumps])
