"""`msprobe-atb status [DIR] [--json]`: what the probe is doing, in plain words."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from msprobe_atb.argtypes import seconds
from msprobe_atb.config.compile import STATE_NAMES, TASK_NAMES
from msprobe_atb.config.schema import CHECK_MODES, POLICIES
from msprobe_atb.recorder import status as recorder_status
from msprobe_atb.tree.lag import appended_of, behind_text, measure, per_log_lines, records_built
from msprobe_atb.tree.models import model_kind, span_label
from msprobe_atb.tree.progress import unwritten_text
from msprobe_atb.tree.roundcount import round_counts
from msprobe_atb.units import size_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="state, config in force, attached processes, progress",
                       description="Show the state and config in force, any rejected config "
                       "edit, the daemon, every attached process with its counters, and "
                       "whether everything selected so far has been written.")
    p.add_argument("dirs", nargs="*", metavar="DIR",
                   help="output roots or their atb_dump_data directories, e.g. one per node "
                        "(default: $ATB_OUTPUT_DIR or the current directory)")
    p.add_argument("--json", action="store_true",
                   help="machine-readable output (a list when several DIRs are given)")
    p.add_argument("--watch", action="store_true",
                   help="a live view, refreshed in place, with each process's progress and "
                        "write rate (Ctrl-C to leave)")
    p.add_argument("--interval", type=seconds, default=1.0, metavar="S",
                   help="with --watch: seconds between refreshes (1)")
    p.add_argument("--count", type=int, default=0, metavar="N",
                   help="with --watch: stop after N refreshes (default: until Ctrl-C)")
    p.set_defaults(func=run)


def _config_view(c, kept_recorder=None) -> dict[str, Any]:
    if c.exec_mode == 1:
        exec_range = "all"
    elif c.exec_mode == 0:
        exec_range = "none"
    else:
        exec_range = ",".join(f"{lo},{hi}" for lo, hi in c.ranges)
    view = {
        "state": STATE_NAMES.get(c.state, f"unknown({c.state})"),
        "task": TASK_NAMES.get(c.task, f"unknown({c.task})"),
        "exec_range": exec_range,
        "ids": ",".join(c.ids),
        "op_name": ",".join(c.op_names),
        "save_child": bool(c.save_child),
        "device": ",".join(map(str, c.devices)),
        "filter_level": c.filter_level,
        "save_all_stages": bool(c.save_all_stages),
        "queue_budget_mb": c.queue_budget_bytes >> 20,
        "queue_full_policy": POLICIES[c.queue_policy] if c.queue_policy < 2 else "?",
    }
    if c.task == 4:
        view["overflow_check"] = {"overflow_nums": c.overflow_nums,
                                  "check_mode": CHECK_MODES[c.overflow_mode]
                                  if c.overflow_mode < 3 else "?",
                                  "probe_scan": bool(c.overflow_scan)}
    rec = recorder_status.config_view(c, kept_recorder)
    if rec:
        view["recorder"] = rec
    if c.next_request:  # exec_range "next:N": each process fixes its rounds (models_view)
        view["exec_range"] = f"next:{c.next_count}"
        view["next_request"] = c.next_request
    return view


def _prefill_first(model: tuple) -> tuple:
    return model_kind(model[0]) != "prefill", model[0]


def _models_view(models, exact: bool, c) -> list[dict[str, Any]]:
    """Each model's executions: `running` is the round in progress, if any. Only an
    awake process sees executions begin (`exact`); asleep, one may be under way
    unseen, so neither `running` nor `next` is known. Under exec_range "next",
    `next_rounds` are the rounds this process fixed for the edit in force ([first,
    last]; None until an execution of the model began after the edit)."""
    return [{"model": m.name, "kind": model_kind(m.name), "started": m.started,
             "executed": m.executed, "exact": exact,
             "running": (m.started - 1 if m.started > m.executed else None) if exact else None,
             "next": m.started if exact else None,
             "next_rounds": [m.next_first, m.next_first + c.next_count - 1]
             if c.next_request and m.next_request == c.next_request else None}
            for m in sorted(models, key=_prefill_first)]


def _models_text(models: list[dict[str, Any]]) -> str:
    parts = []
    for m in models:
        label = m["kind"] or m["model"]
        if m["running"] is not None:
            parts.append(f"{label} round {m['running']} running")
        elif m["executed"]:
            parts.append(f"{label} round {m['executed'] - 1} done"
                         + (f", next is round {m['next']}" if m["exact"] else ""))
        else:
            parts.append(f"{label}: no round yet")
    return "; ".join(parts) + ("" if all(m["exact"] for m in models) else
                               " (asleep, a round is counted when it ends)")


PICKING = ("an execution begun after the edit, of a model not known yet, is being dumped "
           "(its model and round are fixed when it ends)")


def next_text(models: list[dict[str, Any]]) -> str:
    """exec_range "next" in one process: "prefill round 4 (M_Prefill), decode: the next
    execution (round not fixed yet)"."""
    return ", ".join(
        f"{span_label(*m['next_rounds'], m['model'])} ({m['model']})" if m["next_rounds"]
        else f"{m['kind'] or m['model']}: the next execution (round not fixed yet)"
        for m in models)


def _next_config_text(exec_range: str) -> str:
    n = int(exec_range.partition(":")[2])
    return (f"exec_range {exec_range}: the next {n if n > 1 else ''}"
            f"{' executions' if n > 1 else 'execution'} of each model after the edit; each "
            "process fixes the rounds when the model next begins (see each process)")


def _derived_view(dump_root: Path, appended: dict[str, int]) -> dict[str, Any]:
    """How far statistic.csv, the markers and the manifest hold the record logs
    (`.probe/built.json`): record logs with records not handled yet, how many records
    and how old (tree/lag.py; `appended`: lines per log, from the slots), the records
    built so far, and what a full disk kept out of the files."""
    from msprobe_atb.tree import progress

    built = progress.read(dump_root)
    return {"unbuilt_logs": len(progress.unbuilt(dump_root, built)),
            "behind": measure(dump_root, built, appended).view(),
            "built_records": records_built(built),
            "unwritten": built.unwritten if built else None}


def collect(dump_root: Path) -> dict[str, Any]:
    from msprobe_atb.control.block import (
        PROC_ABI_MISMATCH,
        PROC_AWAKE_SEEN,
        PROC_MODELS_EXACT,
        ControlBlock,
    )
    from msprobe_atb.control.liveness import is_alive, is_daemon

    with ControlBlock(dump_root, create=False) as block:
        gen, cfg = block.read_config()
        daemon_pid = block.daemon_pid
        kept = (recorder_status.kept_recorder(dump_root, block.config_path)
                if cfg.rec_armed and cfg.rec_triggers & recorder_status.DAEMON_TRIGGERS else None)
        out: dict[str, Any] = {
            "dump_root": str(dump_root),
            "config_path": block.config_path,
            "generation": gen,
            "published": block.published,
            "config": _config_view(cfg, kept),
            "rejected_edit": block.error,
            "daemon": {"pid": daemon_pid, "alive": bool(daemon_pid) and is_daemon(daemon_pid),
                       "stop_requested": block.stop_requested},
            "processes": [],
            "recorder": recorder_status.block_view(block, cfg),
        }
        now_ns = time.time_ns()
        slots = block.procs()
        for s in slots:
            lost = s.drops + s.errors
            alive = not s.exited and is_alive(s.pid, s.start_ns)
            # Killed before its exit drain: what it still held will never be written.
            died = not alive and not s.exited
            unwritten = max(0, s.tensors_selected - s.tensors_written - lost)
            out["processes"].append({
                "pid": s.pid, "device": s.device, "abi": s.abi,
                "alive": alive, "exited": s.exited,
                "awake_seen": bool(s.flags & PROC_AWAKE_SEEN),
                "abi_mismatch": bool(s.flags & PROC_ABI_MISMATCH),
                "ops_seen": s.ops_seen, "tensors_selected": s.tensors_selected,
                "tensors_written": s.tensors_written, "bytes_written": s.bytes_written,
                "queue_depth": s.queue_depth, "queue_bytes": s.queue_bytes,
                "drops": s.drops, "errors": s.errors, "records": s.records,
                "params_lost": s.params_lost, "params_unrecorded": s.params_unrecorded,
                "overflow_events": s.overflow_events,
                "linked": s.linked, "link_refused": s.link_refused,
                "host_s": round(s.host_ns / 1e9, 3),
                "last_activity_s_ago": round((now_ns - s.last_activity_ns) / 1e9, 1)
                if s.last_activity_ns else None,
                "config_generation": s.config_generation,
                "lost_at_death": unwritten if died else 0,
                "all_written": died or (s.queue_depth == 0
                                        and s.tensors_selected == s.tensors_written + lost),
                "recorder": recorder_status.proc_view(s, bool(cfg.rec_armed)),
                "models": _models_view(s.models, bool(s.flags & PROC_MODELS_EXACT), cfg),
                "next_picking": s.next_picking if cfg.next_request else 0,
            })
    rounds, complete, ended = round_counts(
        dump_root, {p["pid"] for p in out["processes"] if p["alive"]})
    out["rounds"] = {"total": rounds, "complete": complete, "open_ended": ended}
    out["derived"] = _derived_view(dump_root, appended_of(slots))
    out["all_written"] = all(p["all_written"] for p in out["processes"])
    return out


def _asleep_reason(st: dict[str, Any]) -> str:
    path = st["config_path"]
    if not path:
        return "asleep: no config file was given (ATB_DUMP_CONFIG is not set)"
    if not os.path.lexists(path):
        return (f"asleep: the config file {path} does not exist; create it with "
                '"dump_enable": true to start dumping')
    if st["rejected_edit"] and not st["published"]:
        return "asleep: the config file was rejected (see below) and none was valid before"
    return f'asleep: "dump_enable" is false in {path}'


def state_text(st: dict[str, Any]) -> str:
    cfg = st["config"]
    if not st["published"] and not st["daemon"]["alive"]:
        procs = st["processes"]
        if procs and not any(p["alive"] for p in procs):
            return ("finished: every attached process has exited and so has the control "
                    "plane (the config it last published is shown)")
        return "asleep: no control plane is running (the config it last published is shown)"
    if cfg["state"] == "asleep":
        return _asleep_reason(st)
    if cfg["exec_range"] == "none":
        return 'awake, dumping nothing (exec_range "none")'
    return "awake, dumping"


def render(st: dict[str, Any]) -> str:
    cfg = st["config"]
    lines = [f"dump root:   {st['dump_root']}",
             f"config file: {st['config_path'] or '(none)'}"]
    d = st["daemon"]
    if d["alive"]:
        lines.append(f"daemon:      running (pid {d['pid']})"
                     + (", finishing (unload asked it to stop)" if d["stop_requested"] else ""))
    else:
        lines.append("daemon:      not running (the shim starts it when a process attaches)")
    lines.append("state:       " + state_text(st))
    shown = {k: v for k, v in cfg.items() if k not in ("state", "next_request")}
    lines.append("config in force: " + json.dumps(shown))
    if cfg.get("next_request"):
        lines.append(_next_config_text(cfg["exec_range"]))
    if st["rejected_edit"]:
        lines.append(f"REJECTED EDIT (the config above stays in force): {st['rejected_edit']}")
    procs = st["processes"]
    lines.append(f"processes:   {len(procs)} attached, "
                 f"{sum(p['alive'] for p in procs)} alive")
    for p in procs:
        dev = p["device"] if p["device"] >= 0 else "?"
        state = "alive" if p["alive"] else "exited" if p["exited"] else "gone"
        ago = p["last_activity_s_ago"]  # the last record written, not the last op
        lines.append(
            f"  pid {p['pid']} device {dev}: {state}; ops seen {p['ops_seen']}, tensors "
            f"{p['tensors_written']}/{p['tensors_selected']} written "
            f"({size_text(p['bytes_written'])}), queue {p['queue_depth']} "
            f"({size_text(p['queue_bytes'])}), drops {p['drops']}, "
            f"errors {p['errors']}, "
            + ("no tensor written" if not p["tensors_written"] else "last tensor written "
               + ("at an unknown time" if ago is None else f"{ago:g} s ago")))
        if p["models"]:
            lines.append(f"    models: {_models_text(p['models'])}")
        if p["models"] and cfg.get("next_request"):
            lines.append(f"    exec_range {cfg['exec_range']}: {next_text(p['models'])}"
                         + ("; " + PICKING if p["next_picking"] else ""))
        if p["host_s"]:
            lines.append(f"    the host's threads spent {p['host_s']:g} s in the probe (copying "
                         "selected tensors, waiting for queue room, the exit drain)")
        if p["linked"]:
            lines.append(f"    {p['linked']} of the written tensors share storage with an "
                         "identical earlier one (hard links; statistic_extra.csv: linked)")
        if p["link_refused"]:
            lines.append(f"    WARNING: {p['link_refused']} duplicates are data= stubs because "
                         "the file system refused hard links; msProbe's tools cannot read "
                         "them (filter_level 0 saves every tensor in full)")
        if p["recorder"]:
            lines += recorder_status.render_proc(p["recorder"], size_text)
        if p["abi_mismatch"]:
            lines.append("    WARNING: the host's libatb.so uses the other C++ ABI than this "
                         "shim build; nothing is dumped (check ATB_HOME_PATH's cxx_abi_N)")
        if p["lost_at_death"]:
            lines.append(f"    LOST: {p['lost_at_death']} selected tensors were not written "
                         "when the process died (killed before its exit drain); they have "
                         "no .bin and no record")
        elif not p["all_written"]:
            pending = p["tensors_selected"] - p["tensors_written"] - p["drops"] - p["errors"]
            lines.append(f"    {pending} selected tensors not written yet")
        if p["drops"] or p["errors"]:
            lines.append(f"    LOST: {p['drops']} dropped (queue full, policy drop), "
                         f"{p['errors']} failed (see .probe/daemon.log and the record log)")
        if p["params_lost"]:
            lines.append(f"    LOST: {p['params_lost']} op_param.json files not written "
                         "(`msprobe-atb replay` cannot replay their ops)")
    if "recorder" in cfg or st["recorder"]["incidents_total"]:
        lines.append(recorder_status.render_block(st["recorder"]))
    lines.append(_rounds_text(st["rounds"], st.get("derived") or {}, d["alive"]))
    lines += _derived_lines(st.get("derived") or {}, d["alive"])
    if st["all_written"]:
        lines.append("everything selected so far has been written"
                     + (" (some tensors were lost, see above)"
                        if any(p["drops"] or p["errors"] or p["lost_at_death"]
                               for p in procs) else ""))
    else:
        lines.append("still writing: some selected tensors are queued or in flight")
    return "\n".join(lines)


def _rounds_text(r: dict[str, Any], derived: dict[str, Any], daemon_alive: bool) -> str:
    """The round dirs, and why the open ones are open: a live process's wait for it
    to move on; an ended process's are the derived files' (a full disk kept their
    files or markers out, or their records are not built yet)."""
    ended = r.get("open_ended", 0)
    waiting = r["total"] - r["complete"] - ended
    text = (f"rounds:      {r['total']} execution-round directories, {r['complete']} marked "
            "complete (ROUND_COMPLETE.json)")
    if waiting:
        text += (f"; {waiting} still open: a round is marked once its process has moved to "
                 "another round, gone to sleep or exited")
    if ended:
        unwritten = derived.get("unwritten")
        why = (f"their files or markers could not be written "
               f"({unwritten.get('reason') or 'unknown error'}; NOT WRITTEN below)"
               if unwritten else "their records are not built yet (derived files below)"
               if derived.get("behind") else "the control plane marks them once it has "
               "read their process's last records" if daemon_alive
               else "no control plane marked them (`msprobe-atb rebuild` does)")
        text += f"; {ended} of processes that have ended still open: {why}"
    return text


def _derived_lines(derived: dict[str, Any], daemon_alive: bool) -> list[str]:
    """What the derived files lack: what a full disk kept out, and the records not
    built yet, how many and how old (per record log where several are behind)."""
    lines = []
    if derived.get("unwritten"):
        lines.append("NOT WRITTEN: " + unwritten_text(derived["unwritten"]))
    behind = derived.get("behind")
    if behind:
        lines.append(f"derived files: {behind_text(behind)}"
                     + (" (the control plane builds them; `msprobe-atb wait` waits for them)"
                        if daemon_alive else ", and no control plane is running: `msprobe-atb "
                        "wait` or `msprobe-atb rebuild` builds them"))
        lines += ["  " + line for line in per_log_lines(behind)]
    return lines


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = width if total <= 0 else min(width, round(width * done / total))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def render_watch(st: dict[str, Any], prev: dict[int, tuple[float, int]], now: float) -> str:
    """The live view: the state in one line, then per process a progress bar of
    tensors written against selected, the bytes, and the write rate since the last
    frame; the records the derived files lack, if any."""
    lines = [f"{st['dump_root']}  {time.strftime('%H:%M:%S')}",
             "state: " + state_text(st), ""]
    for p in st["processes"]:
        done = p["tensors_written"] + p["drops"] + p["errors"]
        t0, b0 = prev.get(p["pid"], (now, p["bytes_written"]))
        rate = (p["bytes_written"] - b0) / (now - t0) if now > t0 else 0.0
        prev[p["pid"]] = (now, p["bytes_written"])
        dev = p["device"] if p["device"] >= 0 else "?"
        state = "alive" if p["alive"] else "exited" if p["exited"] else "gone"
        lines.append(f"pid {p['pid']:>7} dev {dev} {state:<6} {_bar(done, p['tensors_selected'])} "
                     f"{p['tensors_written']}/{p['tensors_selected']} tensors  "
                     f"{size_text(p['bytes_written'])}  {size_text(int(rate))}/s  "
                     f"queue {p['queue_depth']}  ops {p['ops_seen']}"
                     + (f"  LOST {p['drops'] + p['errors'] + p['lost_at_death']}"
                        if p["drops"] or p["errors"] or p["lost_at_death"] else ""))
    if not st["processes"]:
        lines.append("no process attached yet")
    behind = st["derived"]["behind"]
    if behind:
        lines.append(f"derived files: {behind_text(behind)}")
    lines += ["", "everything selected so far has been written" if st["all_written"]
              else "still writing: some selected tensors are queued or in flight"]
    return "\n".join(lines)


def watch(dump_root: Path, interval: float, count: int) -> int:
    """Refreshes the view in place on a terminal (a new frame each time elsewhere)."""
    tty = sys.stdout.isatty()
    prev: dict[int, tuple[float, int]] = {}
    frame = 0
    while True:
        text = render_watch(collect(dump_root), prev, time.monotonic())
        sys.stdout.write(("\x1b[H\x1b[2J" if tty else "\n") + text + "\n")
        sys.stdout.flush()
        frame += 1
        if count and frame >= count:
            return 0
        time.sleep(max(0.05, interval))


def _record_logs(dump_root: Path) -> list:
    """The record logs of a dump with no control block (the torch dumper's), with
    their records; [] if it has none or they cannot be read."""
    from msprobe_atb.torch import summary

    try:
        return summary.dumped_since(dump_root, 0)
    except OSError:
        return []


def run(args: argparse.Namespace) -> int:
    from msprobe_atb.control.block import ControlError
    from msprobe_atb.torch import summary
    from msprobe_atb.tree.cli import find_dump_root, no_control_block

    dirs = args.dirs or [os.environ.get("ATB_OUTPUT_DIR") or "."]
    if args.watch and len(dirs) > 1:
        print("msprobe-atb status: --watch shows one output dir; give one DIR",
              file=sys.stderr)
        return 2
    rc, states = 0, []
    for d in dirs:  # every dir is reported, whatever happened to the others
        dump_root = find_dump_root(d)
        problem = no_control_block(d, dump_root)
        logs = _record_logs(dump_root) if problem and os.path.isdir(d) else []
        if logs and args.json:
            print(f"{dump_root}: a torch dump (record logs, no control block): --json "
                  "describes a control block; `msprobe-atb status DIR` shows its processes",
                  file=sys.stderr)
            rc = max(rc, 2)
            continue
        if logs:  # a torch dump: its record logs are all there is
            print(summary.render(dump_root, summary.config_of(logs), logs,
                                 final=summary.all_exited(logs)))
            continue
        if problem:
            print(problem, file=sys.stderr)
            rc = max(rc, 2)
            continue
        try:
            if args.watch:
                return watch(dump_root, args.interval, args.count)
            states.append(collect(dump_root))
        except ControlError as exc:
            print(f"msprobe-atb status: {dump_root}: {exc}", file=sys.stderr)
            rc = max(rc, 1)
    if args.json and len(dirs) == 1:
        if states:  # else its error said why, and stdout holds no JSON to misread
            print(json.dumps(states[0], indent=2))
    elif args.json:
        print(json.dumps(states, indent=2))
    elif states:
        print("\n\n".join(render(st) for st in states))
    return rc
