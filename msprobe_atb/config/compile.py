"""The compiled config: a validated config in the control block's form (`struct
msp_config` of control.h, contracts §3), the form the daemon publishes to the shims
and `status` reads back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msprobe_atb.config.schema import CHECK_MODES, POLICIES, Config

TASK_BITS = {"tensor": 1, "statistics": 2, "all": 3, "overflow_check": 4}


@dataclass(frozen=True)
class CompiledConfig:
    """Field-for-field the `struct msp_config` of control.h, in Python types."""

    state: int = 0
    task: int = 1
    exec_mode: int = 0
    ranges: tuple[tuple[int, int], ...] = ()
    save_child: int = 0
    filter_level: int = 1
    ids: tuple[str, ...] = ()
    op_names: tuple[str, ...] = ()
    devices: tuple[int, ...] = ()
    overflow_mode: int = 0
    overflow_nums: int = -1
    overflow_scan: int = 0
    queue_budget_bytes: int = 1024 << 20
    queue_policy: int = 0
    save_all_stages: int = 0
    rec_armed: int = 0
    rec_keep_rounds: int = 0
    rec_after_rounds: int = 0
    rec_max_incidents: int = 0
    rec_triggers: int = 0
    rec_flush_on_exit: int = 0
    rec_budget_bytes: int = 0
    rec_abs_max: float = 0.0
    rec_arming: int = 0  # set by the daemon: bumped at each new arming (see Controller)
    rec_incident_base: int = 0  # set by the daemon when it arms (see Controller)
    # exec_range "next[:N]": N, and the edit's request number (set by the daemon, a new one
    # per edit: Controller); each shim fixes its rounds per model when that model next
    # begins; `ranges` holds the rounds of every op of no known model
    next_count: int = 0
    next_request: int = 0


STATE_NAMES = {0: "asleep", 1: "awake"}
EXEC_MODES = {"none": 0, "all": 1, "ranges": 2}
TASK_NAMES = {v: k for k, v in TASK_BITS.items()}


ASLEEP = CompiledConfig()


def compile_config(cfg: Config | None) -> CompiledConfig:
    """Maps a validated config to the control block (contracts §3); None = asleep."""
    if cfg is None:
        return ASLEEP
    overflow = cfg.task == "overflow_check"
    return CompiledConfig(
        state=1 if cfg.dump_enable else 0,
        task=TASK_BITS[cfg.task],
        exec_mode=EXEC_MODES["ranges" if cfg.exec_mode == "next" else cfg.exec_mode],
        ranges=cfg.ranges if cfg.exec_mode in ("ranges", "next") else (),
        save_child=int(cfg.save_child),
        filter_level=cfg.filter_level,
        ids=cfg.ids,
        op_names=cfg.op_name,
        devices=cfg.device,
        overflow_mode=CHECK_MODES.index(cfg.check_mode) if overflow else 0,
        overflow_nums=cfg.overflow_nums if overflow else -1,
        overflow_scan=int(cfg.probe_scan) if overflow else 0,
        queue_budget_bytes=cfg.queue_budget_mb << 20,
        queue_policy=POLICIES.index(cfg.queue_full_policy),
        save_all_stages=int(cfg.save_all_stages),
        next_count=cfg.ranges[0][1] + 1 if cfg.exec_mode == "next" else 0,
        **_compile_recorder(cfg),
    )


def _compile_recorder(cfg: Config) -> dict[str, Any]:
    r = cfg.recorder
    if r is None or not cfg.dump_enable:
        return {}
    return {"rec_armed": 1, "rec_keep_rounds": r.keep_rounds, "rec_after_rounds": r.after_rounds,
            "rec_max_incidents": r.max_incidents, "rec_triggers": r.trigger_bits,
            "rec_flush_on_exit": int(r.flush_on_exit), "rec_budget_bytes": r.budget_mb << 20,
            "rec_abs_max": r.abs_max_over or 0.0}
