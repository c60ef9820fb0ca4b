"""Which rounds and ops a torch dump selects: the shim's rules (native/core/mechanisms/filter.c,
docs/msprobe_format.md §5.1-§5.2 and §10 item 3) applied to a module's op path, and the config
keys the torch dumper takes or refuses."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from msprobe_atb.config import Config, ConfigError, load_config, validate

# Keys that have no torch meaning: accepted (the same file serves both dumpers),
# said once when they are not at their default.
IGNORED = {"filter_level": 1, "save_all_stages": False, "queue_budget_mb": 1024,
           "queue_full_policy": "block"}


def torch_config(config: str | os.PathLike | dict[str, Any]) -> Config:
    """The validated config (a file path, as `check` reads it, or a dict); raises
    ConfigError naming each problem, also for what the torch dumper cannot do."""
    if isinstance(config, dict):
        cfg = validate(config, "config")
        source = "config"
    elif isinstance(config, (str, os.PathLike)):
        source = os.fspath(config)
        try:
            cfg = load_config(config)
        except FileNotFoundError:
            raise ConfigError(source, ["the file does not exist"]) from None
    else:
        raise ConfigError("config", [f"is {type(config).__name__}; give the path of a config "
                                     "file (JSON or YAML) or a dict of its keys"])
    problems = []
    if cfg.task == "overflow_check":
        problems.append('"task": "overflow_check" is not supported by the torch dumper (it '
                        'watches ATB kernels); use "tensor", "statistics" or "all"')
    if cfg.recorder is not None:
        problems.append('"recorder" (the flight recorder) is not supported by the torch '
                        "dumper; remove it from this config")
    if problems:
        raise ConfigError(source, problems)
    return cfg


def ignored_keys(cfg: Config) -> list[str]:
    """The keys set to something the torch dumper does not act on."""
    return [k for k, default in IGNORED.items() if getattr(cfg, k) != default]


def round_selected(cfg: Config, round_: int) -> bool:
    """exec_range on the top module's forward calls; "next:N" counts from the start."""
    if not cfg.dump_enable or cfg.exec_mode == "none":
        return False
    if cfg.exec_mode == "all":
        return True
    return any(lo <= round_ <= hi for lo, hi in cfg.ranges)


def device_selected(cfg: Config, device: int) -> bool:
    return not cfg.device or device in cfg.device


def op_selected(cfg: Config, segs: Sequence[str]) -> bool:
    """`ids` / `op_name` / `save_child` on an op path ("2_LlamaDecoderLayer",
    "1_LlamaMLP", ...: the segments below the round dir), as msp_op_selected."""
    if not cfg.ids and not cfg.op_name:
        return cfg.save_child or len(segs) == 1
    ids = [s.partition("_")[0] for s in segs]
    for entry in cfg.ids:
        want = entry.split("_")
        if want == ids or (cfg.save_child and ids[:len(want)] == want and len(want) < len(ids)):
            return True
    names = [s.partition("_")[2].lower() for s in segs]
    candidates = names if cfg.save_child else names[-1:]
    return any(n.startswith(f) for f in cfg.op_name for n in candidates)
