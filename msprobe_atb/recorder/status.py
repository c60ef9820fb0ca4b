"""What `msprobe-atb status` says about the flight recorder, per process and
for the output dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msprobe_atb.config.recorder import TRIG_BITS


def _number(v: float) -> float | int:
    """60000.0 as the config wrote it, 60000."""
    return int(v) if v.is_integer() else v


# The control plane's triggers: their values are not in the control block.
DAEMON_TRIGGERS = TRIG_BITS["growth_over"] | TRIG_BITS["golden"]


def kept_recorder(dump_root: Path, config_path: str):
    """The recorder block of the config the control plane keeps in force
    (.probe/last_good_config.json), or None."""
    from msprobe_atb.tree import lastgood

    cfg = lastgood.load(dump_root, Path(config_path)) if config_path else None
    return cfg.recorder if cfg is not None else None


def config_view(c, kept=None) -> dict[str, Any] | None:
    """The recorder block in force, as compiled (None when it is off); `kept` (the
    kept config's Recorder) gives the control plane's triggers their values."""
    if not c.rec_armed:
        return None
    if kept is not None and kept.trigger_bits == c.rec_triggers & ~TRIG_BITS["manual"]:
        triggers = [{k: _number(v) if isinstance(v, float) else v for k, v in t.items()}
                    if isinstance(t, dict) else t for t in kept.effective()["triggers"]]
    else:
        triggers = [{k: _number(c.rec_abs_max)} if k == "abs_max_over" else k
                    for k, bit in TRIG_BITS.items() if c.rec_triggers & bit and k != "manual"]
    return {"keep_rounds": c.rec_keep_rounds, "budget_mb": c.rec_budget_bytes >> 20,
            "triggers": triggers,
            "after_rounds": c.rec_after_rounds, "max_incidents": c.rec_max_incidents,
            "flush_on_exit": bool(c.rec_flush_on_exit)}


def proc_view(s, armed_cfg: bool) -> dict[str, Any] | None:
    from msprobe_atb.control.block import PROC_REC_EXIT_DROP, PROC_REC_TOO_SMALL, REC_STATES

    too_small = bool(s.flags & PROC_REC_TOO_SMALL)
    exit_drop = bool(s.flags & PROC_REC_EXIT_DROP)
    if not (armed_cfg or s.rec_state or s.rec_flushed or too_small or exit_drop):
        return None
    return {"state": REC_STATES.get(s.rec_state, f"unknown({s.rec_state})"),
            "rounds_held": s.rec_rounds, "bytes_held": s.rec_bytes,
            "peak_bytes": s.rec_peak_bytes, "evicted_rounds": s.rec_evicted,
            "flushed_tensors": s.rec_flushed, "lost": s.rec_lost,
            "incidents_applied": s.rec_incident, "budget_too_small": too_small,
            "exit_dropped_ring": exit_drop}


def block_view(block, c) -> dict[str, Any]:
    return {"incidents": block.rec_claimed - c.rec_incident_base if c.rec_armed
            else block.rec_claimed, "incidents_total": block.rec_claimed,
            "suppressed_triggers": block.rec_suppressed}


def render_proc(r: dict[str, Any], size) -> list[str]:
    out = [f"    recorder {r['state']}: {r['rounds_held']} rounds held "
           f"({size(r['bytes_held'])}, peak {size(r['peak_bytes'])}), "
           f"{r['evicted_rounds']} whole rounds evicted, {r['flushed_tensors']} tensors flushed, "
           f"incidents applied {r['incidents_applied']}, lost {r['lost']}"]
    if r["budget_too_small"]:
        out.append("    RECORDER: a round did not fit in recorder.budget_mb and was not kept; "
                   "raise budget_mb (or select fewer tensors)")
    if r["exit_dropped_ring"]:
        out.append("    RECORDER: the process exited while armed; its held rounds were not "
                   "written (recorder.flush_on_exit: true keeps them)")
    return out


def render_block(v: dict[str, Any]) -> str:
    return (f"recorder:    {v['incidents']} incidents since it was armed "
            f"({v['incidents_total']} in all), {v['suppressed_triggers']} triggers not made "
            "incidents (one was queued already, or max_incidents was reached)")
