"""The golden statistics of the `golden` trigger: a statistic.csv made by a good
run (or a dump dir, every round's statistic.csv), keyed by op id path, io and
index (and the round, when the golden has several).

Only an op's inputs before it ran and its outputs after count (an output
buffer before the op ran holds stale data): rows are in execution order, so
an input's first row and an output's last row are kept.

`check` and the daemon judge a config's golden trigger by one function,
`validate_golden`. Files are opened without blocking, and only regular ones are
read: a FIFO or a device named statistic.csv is refused, never waited on."""

from __future__ import annotations

import csv
import stat
from pathlib import Path

from msprobe_atb.config.filecheck import FileRefused, file_kind, open_regular
from msprobe_atb.config.schema import Config, ConfigError

STATS = ("Max", "Min", "Mean", "Norm")
Key = tuple


class GoldenError(ValueError):
    pass


def _float(cell: str) -> float | None:
    try:
        return float(cell.lstrip("'"))
    except ValueError:
        return None


def _files(path: Path) -> list[tuple[str | None, Path]]:
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise GoldenError(f"{path}: {exc.strerror or exc} (give a statistic.csv made by a "
                          "good run, or its dump dir)") from None
    if stat.S_ISREG(mode):
        return [(None, path)]
    if not stat.S_ISDIR(mode):
        raise GoldenError(f"{path}: is {file_kind(mode)}, not a statistic.csv or a dump dir")
    root = path / "atb_dump_data" if (path / "atb_dump_data").is_dir() else path
    found = sorted((root / "data").glob("*/*/statistic.csv"))
    return [(f.parent.name, f) for f in found]


class Golden:
    def __init__(self, path: Path):
        self.path = path
        self.by_round: dict[Key, tuple[float, ...]] = {}
        self.any_round: dict[Key, tuple[float, ...]] = {}
        files = _files(path)
        if not files:
            raise GoldenError(f"{path}: no statistic.csv there (give a statistic.csv made by a "
                              "good run with task statistics or all, or its dump dir)")
        for rnd, f in files:
            try:
                with open(open_regular(f), newline="", encoding="utf-8",
                          errors="replace") as fh:
                    for row in csv.DictReader(fh):
                        values = tuple(_float(row.get(k, "")) for k in STATS)
                        if any(v is None for v in values):
                            continue
                        io = row.get("Input/Output", "")
                        key = (row.get("Op Id", ""), io, row.get("Index", ""))
                        keep = dict.setdefault if io == "input" else dict.__setitem__
                        keep(self.any_round, key, values)
                        if rnd is not None:
                            keep(self.by_round, (rnd, *key), values)
            except FileRefused as exc:
                raise GoldenError(f"{f}: {exc.problem}; give statistic.csv files made by "
                                  "a good run") from None
            except OSError as exc:
                raise GoldenError(f"{f}: cannot read it: {exc}") from None
        if not self.any_round:
            raise GoldenError(f"{path}: no row with statistics (was it made with task "
                              '"tensor"? the golden run needs task "statistics" or "all")')

    def lookup(self, rnd: int, op_id: str, io: str, index: str) -> tuple[float, ...] | None:
        """A dump dir golden answers for its own rounds only (a KV cache differs
        from round to round); a single statistic.csv answers for every round."""
        key = (op_id, io, index)
        if self.by_round:
            return self.by_round.get((str(rnd), *key))
        return self.any_round.get(key)


def validate_golden(cfg: Config | None, config_path: Path | None,
                    known: tuple[Path, Golden] | None = None) -> tuple[Path, Golden] | None:
    """(path, statistics) of the config's golden trigger, its path relative to the
    config file's directory; `known` when it is of the same path; None without a
    golden trigger. Raises ConfigError naming the field, as a rejected edit."""
    rec = cfg.recorder if cfg is not None else None
    if rec is None or rec.golden is None:
        return None
    base = config_path.parent if config_path is not None else Path.cwd()
    path = (base / rec.golden).resolve()
    if known is not None and known[0] == path:
        return known
    try:
        return path, Golden(path)
    except GoldenError as exc:
        raise ConfigError(str(config_path or "config"),
                          [f'"recorder.triggers": golden: {exc}']) from None
