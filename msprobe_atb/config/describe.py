"""Plain-language summary of what a config makes the probe dump."""

from __future__ import annotations

from msprobe_atb.config.recorder import Recorder
from msprobe_atb.config.schema import Config

_TASKS = {
    "tensor": "tensor data (.bin files), statistic.csv with N/A statistics",
    "statistics": "statistics only (statistic.csv, no .bin files)",
    "all": "tensor data (.bin files) and statistics",
}


def _rounds(cfg: Config) -> str:
    if cfg.exec_mode == "all":
        return "every execution round"
    if cfg.exec_mode == "none":
        return "no execution round"
    if cfg.exec_mode == "next":
        n = cfg.ranges[0][1] + 1
        return (f"the next {n} execution{'s' if n > 1 else ''} of each model (prefill, decode), "
                "the first to begin after each process applied the edit; each says which rounds")
    parts = [str(a) if a == b else f"{a} to {b}" for a, b in cfg.ranges]
    return "execution round" + ("s " if parts != ["0"] else " ") + ", ".join(parts)


def _ops(cfg: Config) -> str:
    if not cfg.ids and not cfg.op_name:
        return ("every op (layer-level ops, their child ops and kernels)" if cfg.save_child
                else "layer-level ops only")
    picks = []
    child = " and everything inside them" if cfg.save_child else ""
    if cfg.ids:
        picks.append(f"ops with id {', '.join(cfg.ids)}{child}")
    if cfg.op_name:
        names = ", ".join(f'"{n}"' for n in cfg.op_name)
        picks.append(f"ops whose name starts with {names} (case-insensitive){child}")
    return " or ".join(picks)


def _trigger(rec: Recorder, name: str) -> str:
    values = {"abs_max_over": rec.abs_max_over, "growth_over": rec.growth_over}
    if name == "golden":
        return f"golden {rec.golden} (rtol {rec.rtol:g})"
    return f"{name} {values[name]:g}" if name in values else name


def _armed(cfg: Config, rec: Recorder) -> list[str]:
    """An armed recorder writes nothing while no trigger fires: say that first, since
    "dumps ... in every round" would promise a tree that stays empty."""
    most = ("at most one incident, then it disarms" if rec.max_incidents == 1 else
            f"at most {rec.max_incidents} incidents, then it disarms")
    return ["armed flight recorder: nothing is written until a trigger fires",
            f"triggers: {', '.join(_trigger(rec, t) for t in rec.triggers)}",
            f"keeps in memory the last {rec.keep_rounds} rounds (within {rec.budget_mb} MiB "
            "per process) of",
            f"{_TASKS[cfg.task]}", f"of {_ops(cfg)}", f"in {_rounds(cfg)}",
            f"on a trigger: writes that round, the {rec.keep_rounds} before it and "
            f"{rec.after_rounds} after, and an incident report",
            f"({most})"]


def describe(cfg: Config) -> list[str]:
    if not cfg.dump_enable:
        return ["asleep: dump_enable is false, nothing is dumped (hooks cost one check per op)"]
    lines = ["awake: processes print 'Ready to dump ATB data, ...' once"]
    if cfg.task == "overflow_check":
        limit = "no limit" if cfg.overflow_nums == -1 else f"the first {cfg.overflow_nums}"
        lines.append(f"checks kernels for overflow ({cfg.check_mode}), recording {limit} "
                     "events in info/overflow/")
        lines.append("ATB reports fp16, fp32 and (read as fp16) bf16 infinities; "
                     + ("the probe also scans every kernel's outputs for NaN and bf16 Inf, "
                        "which ATB misses (ATB then copies every kernel's tensors)"
                        if cfg.probe_scan else
                        "NaN and bf16 Inf, which ATB misses, go unseen (probe_scan true finds "
                        "them)"))
        return lines
    if cfg.exec_mode == "none":
        lines.append('exec_range "none": woken up, dumping nothing (the warm-up step)')
        return lines
    if cfg.recorder:
        lines += _armed(cfg, cfg.recorder)
    else:
        lines += [f"dumps {_TASKS[cfg.task]}", f"of {_ops(cfg)}", f"in {_rounds(cfg)}"]
    devices = ", ".join(str(d) for d in cfg.device) if cfg.device else "every device"
    lines.append(f"on {'device ' if cfg.device else ''}{devices}")
    lines.append("stages: all four (before/ and after/ hold inputs and outputs)"
                 if cfg.save_all_stages else
                 "stages: before/ holds each op's inputs, after/ its outputs")
    if cfg.save_child and cfg.task != "statistics":
        lines.append({0: "filter_level 0: every tensor saved in full",
                      1: "filter_level 1: identical tensors of a layer are stored once "
                         "(hard links: every file reads in full)",
                      2: "filter_level 2: as 1, and kernel tensors are not saved (stubs)"}
                     [cfg.filter_level])
    policy = ("block: the model waits when it is full (lossless)"
              if cfg.queue_full_policy == "block"
              else "drop: tensors are dropped and counted when it is full (never stalls)")
    lines.append(f"copy queue budget {cfg.queue_budget_mb} MiB, policy {policy}")
    return lines
