"""A Dask worker announces the dump roots it can read, for `compare --scheduler`.

    dask worker tcp://HOST:8786 --preload msprobe_atb.offline.dask_roots \\
        --dump-root /local/dumps --dump-root /shared/dumps

The compare client asks every worker for its roots (`announced_roots`) and runs
a pair only on a worker whose roots hold both of its files (paths as the client
names them: mount each node's dump at the same path on the client and on the
node). A worker started without this preload, or without --dump-root, is taken
to read every path (a cluster on shared storage).
"""

from __future__ import annotations

import os

import click

_ROOTS: list[str] | None = None


@click.command()
@click.option("--dump-root", "dump_roots", multiple=True, type=click.Path(),
              help="a directory holding dump trees this worker can read (repeatable)")
def dask_setup(worker, dump_roots: tuple[str, ...]) -> None:  # noqa: ARG001 (Dask's hook)
    global _ROOTS
    missing = [r for r in dump_roots if not os.path.isdir(r)]
    if missing:
        raise click.BadParameter(f"not a directory on this worker: {', '.join(missing)}",
                                 param_hint="--dump-root")
    _ROOTS = [os.path.realpath(r) for r in dump_roots] or None


def announced_roots() -> list[str] | None:
    """The roots this worker announced; None: it reads every path."""
    return _ROOTS


def can_read(roots: list[str] | None, path: str) -> bool:
    if roots is None:
        return True
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)
