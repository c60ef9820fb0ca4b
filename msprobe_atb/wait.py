"""`msprobe-atb wait DIR [--timeout S]`: block until the dump is complete so far.

Complete means: the control plane has handled the config file as it is now (so a
`wait` right after an edit returns once the edit is in force or refused), every
selected tensor of every attached process is written (or counted as lost), and
every record is in the derived files (statistic.csv, info/, the round markers of
finished processes), as `.probe/built.json` says. With no control plane running
and records not yet built, the tree is rebuilt from the record logs. Derived
files that could not be written (a full disk) end the wait as a loss (exit 1),
named: their records are in the logs only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msprobe_atb.argtypes import seconds_or_zero
from msprobe_atb.tree.cli import output_dir_arg
from msprobe_atb.tree.lag import behind_text, duration_text

EXIT_OK, EXIT_LOST, EXIT_NO_DUMP, EXIT_TIMEOUT, EXIT_REFUSED = 0, 1, 2, 3, 4
POLL_S = 0.05
REPORT_EVERY_S = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wait", help="block until every selected tensor is written and every derived "
        "file is built",
        description="Block until the control plane has applied (or refused) the config "
        "file as it is now, every selected tensor of every attached process is written, "
        "and statistic.csv, info/ and the round markers hold every record. Exit code: 0 "
        "everything selected was written, 1 some selected tensors were lost (dropped, "
        "failed, or held by a process that died) or their rows could not be written to "
        "the derived files (a full disk), 2 not a dump directory, 3 timed out, 4 the control "
        "plane refused the config file as it is now (the reason is said; the previous config "
        "stays in force).")
    output_dir_arg(p)
    p.add_argument("--timeout", type=seconds_or_zero, default=None, metavar="S",
                   help="give up after S seconds (exit code 3); default: wait as long as it takes")
    p.set_defaults(func=run)


@dataclass
class State:
    done: bool
    waiting_for: str  # what is missing, in words ("" when done)
    lost: int
    status: dict[str, Any]
    unwritten: str = ""  # derived files a full disk kept out, in words ("" if none)
    building: bool = False  # not done only because records are not in the derived files
    refused: str = ""  # why the control plane refused the config file as it is now

    @property
    def params_lost(self) -> int:
        """op_param.json files not written (no tensors: not in `lost`)."""
        return sum(p["params_lost"] for p in self.status["processes"])

    @property
    def behind(self) -> dict[str, Any] | None:
        """While building: the records not in the derived files yet (tree/lag.py)."""
        return self.status["derived"]["behind"] if self.building else None


class BuildRate:
    """How fast the control plane builds records (built.json's count) and the
    processes append them (their slots'), between one look and the next."""

    def __init__(self) -> None:
        self._last: tuple[float, int | None, int] | None = None

    def start(self, status: dict[str, Any], now: float) -> None:
        """The first look, the baseline of the first rate (nothing once there is one)."""
        if self._last is None:
            self.look(status, now)

    def look(self, status: dict[str, Any],
             now: float) -> tuple[float, float | None, float] | None:
        """(seconds since the last look, records built a second, None where built.json
        did not count them both times, records appended a second); None at the first
        look, and where fewer are built than before (a new control plane starts over)."""
        built = status["derived"]["built_records"]
        appended = sum(p["records"] for p in status["processes"])
        last, self._last = self._last, (now, built, appended)
        if last is None or now <= last[0]:
            return None
        dt, built_before = now - last[0], last[1]
        append = max(0, appended - last[2]) / dt
        if built is None or built_before is None:
            return dt, None, append
        if built < built_before:
            return None
        return dt, (built - built_before) / dt, append


def _per_s(x: float) -> str:
    return f"{x:,.0f}/s" if x >= 10 else f"{x:.1f}/s"


def building_text(behind: dict[str, Any], rates: tuple[float, float | None, float] | None) -> str:
    """The records behind and, from BuildRate.look, the building rate and the time
    left: "statistic.csv 61,901 records behind, the oldest 12 s ago; building
    9,800/s, about 6 s left"."""
    text = behind_text(behind)
    if rates is None:
        return text
    dt, build, append = rates
    if build is None:
        return (text + "; the building rate is not known (built.json does not count the "
                "records built): no estimate of the time left")
    appending = f" while {_per_s(append)} are appended" if append else ""
    if build <= 0:
        return (f"{text}; nothing built in the last {dt:.0f} s{appending}: no estimate of "
                "the time left")
    if build <= append:
        return (f"{text}; building {_per_s(build)}{appending}: the backlog is not shrinking, "
                "no estimate of the time left")
    if not behind["records"]:  # bytes only: no count to divide
        return f"{text}; building {_per_s(build)}{appending}"
    return (f"{text}; building {_per_s(build)}{appending}, about "
            f"{duration_text(behind['records'] / (build - append))} left")


def check(dump_root: Path) -> State:
    """One look at the dump: is it complete so far, and if not, what is missing."""
    from msprobe_atb.status import collect
    from msprobe_atb.tree import progress

    st = collect(dump_root)
    lost = sum(p["drops"] + p["errors"] + p["lost_at_death"] for p in st["processes"])
    built = progress.read(dump_root)
    daemon = st["daemon"]["alive"]
    if daemon and st["config_path"]:
        handled = built.config_sha256 if built and built.daemon_pid == st["daemon"]["pid"] \
            else None
        if handled not in progress.config_tokens(st["config_path"]):
            return State(False, f"the control plane to read {st['config_path']}", lost, st)
    state = _written(dump_root, st, lost, built)
    if state.done and st["config"].get("next_request"):
        state = _next_ran(state)
    # Handled: the control block's error is about this very file (set before built.json).
    state.refused = (daemon and st["config_path"] and st["rejected_edit"]) or ""
    return state


def _written(dump_root: Path, st: dict[str, Any], lost: int, built) -> State:
    """Whether every selected tensor is written and every record built."""
    from msprobe_atb.tree import progress

    queued = [p for p in st["processes"] if not p["all_written"]]
    if queued:
        n = sum(max(0, p["tensors_selected"] - p["tensors_written"] - p["drops"] - p["errors"])
                for p in queued)
        return State(False, f"{n} selected tensors of {len(queued)} process(es) to be written",
                     lost, st)
    unbuilt = progress.outdated(dump_root, built)
    if unbuilt:
        return State(False, f"statistic.csv and info/ of {len(unbuilt)} process(es) to be built",
                     lost, st, building=True)
    return State(True, "", lost, st,
                 progress.unwritten_text(built.unwritten) if built and built.unwritten else "")


def _next_ran(state: State) -> State:
    """exec_range "next": not done while a round a live process fixed has not ended, or
    an execution it dumps has not ended (rounds not fixed yet, of executions not begun,
    are not waited for)."""
    from msprobe_atb.tree.models import span_label

    exec_range = state.status["config"]["exec_range"]
    for p in state.status["processes"]:
        if p["alive"] and p["next_picking"]:
            return State(False, f"an execution of pid {p['pid']} begun after the edit to end "
                         f"(exec_range {exec_range}; its model and round are fixed then)",
                         state.lost, state.status)
        for m in p["models"] if p["alive"] else ():
            if m["next_rounds"] and m["executed"] <= m["next_rounds"][1]:
                return State(False, f"{span_label(*m['next_rounds'], m['model'])} of pid "
                             f"{p['pid']} to run (exec_range {exec_range})",
                             state.lost, state.status)
    return state


def next_outcome(status: dict[str, Any]) -> str:
    """Under exec_range "next": which rounds each process chose, in words ("" if none)."""
    from msprobe_atb.status import next_text

    procs = [p for p in status["processes"] if p["models"]]
    if not any(m["next_rounds"] for p in procs for m in p["models"]):
        return ""
    return "; ".join(f"pid {p['pid']}: {next_text(p['models'])}" for p in procs)


def _rebuild(dump_root: Path) -> tuple[bool, str]:
    """Builds the derived files when no control plane runs: (False if one took
    over, what could not be written in words or "")."""
    from msprobe_atb.control.lockfile import try_lock
    from msprobe_atb.tree.drain import rebuild
    from msprobe_atb.tree.progress import unwritten_text

    try:
        lock = try_lock(dump_root)
    except OSError as exc:
        return True, f"cannot take the control plane's lock to build the tree: {exc.strerror}"
    if lock is None:
        return False, ""
    try:
        import logging

        from msprobe_atb.control.block import ControlBlock

        # what could not be written is said once, in the summary, not file by file
        logging.getLogger("msprobe_atb").setLevel(logging.ERROR)
        with ControlBlock(dump_root, create=False) as block:
            summary = rebuild(dump_root, block).unwritten_summary()
    finally:
        os.close(lock)
    return True, unwritten_text(summary) if summary else ""


def _until_exit(state: State) -> State:
    """Not done while an attached process still runs (and may select more)."""
    alive = [p["pid"] for p in state.status["processes"] if p["alive"]]
    if not state.done or not alive:
        return state
    pids = ", ".join(map(str, alive[:8])) + (", ..." if len(alive) > 8 else "")
    return State(False, f"{len(alive)} attached process(es) to exit (pid {pids})", state.lost,
                 state.status)


def wait_for(dump_root: Path, timeout: float | None, say=None,
             refusal_ends: bool = False, until_exit: bool = False) -> tuple[int, State]:
    """Polls until complete; (exit code, last state). `say(text)` gets progress lines.
    `refusal_ends`: a refused config file ends the wait at once (EXIT_REFUSED).
    `until_exit`: complete only once every attached process has exited, too."""
    start = time.monotonic()
    next_report = start + 1.0
    rebuilt = False
    rate = BuildRate()
    while True:
        state = check(dump_root)
        rate.start(state.status, time.monotonic())
        if until_exit:
            state = _until_exit(state)
        if refusal_ends and state.refused:
            return EXIT_REFUSED, state
        if state.done:
            return (EXIT_LOST if state.lost or state.unwritten else EXIT_OK), state
        procs_alive = any(p["alive"] for p in state.status["processes"])
        if not state.status["daemon"]["alive"] and not procs_alive and not rebuilt:
            # Nobody will build the tree: do it here (once; a daemon may start meanwhile).
            rebuilt, unwritten = _rebuild(dump_root)
            if rebuilt:
                after = check(dump_root)
                if after.done or after.building:
                    # built here: what the tree holds is known even where built.json,
                    # on the same full disk, could not say it
                    return (EXIT_LOST if after.lost or unwritten else EXIT_OK), State(
                        True, "", after.lost, after.status, unwritten)
                continue
        now = time.monotonic()
        if timeout is not None and now - start >= timeout:
            return EXIT_TIMEOUT, state
        if say and now >= next_report:
            rates = rate.look(state.status, now)
            say(f"waiting for {state.waiting_for} ({now - start:.0f} s)"
                + (f": {building_text(state.behind, rates)}" if state.behind else ""))
            next_report = now + REPORT_EVERY_S
        time.sleep(POLL_S)


def wait_reporting(dump_root: Path, timeout: float | None, who: str,
                   refusal_ends: bool = False,
                   until_exit: bool = False) -> tuple[int, State] | None:
    """wait_for with progress lines and problems on stderr, prefixed `who: `;
    None if the control block cannot be used (said why)."""
    from msprobe_atb.control.block import ControlError

    try:
        return wait_for(dump_root, timeout, lambda s: print(f"{who}: {s}", file=sys.stderr),
                        refusal_ends, until_exit)
    except ControlError as exc:
        print(f"{who}: {exc}", file=sys.stderr)
        return None


def outcome(state: State) -> str:
    """One line on how the dump ended."""
    procs = state.status["processes"]
    written = sum(p["tensors_written"] for p in procs)
    linked = sum(p["linked"] for p in procs)
    text = (f"{written} selected tensors written by {len(procs)} process(es)"
            + (f", {linked} of them hard links to identical ones" if linked else ""))
    if state.lost:
        text += f"; LOST {state.lost} (see `msprobe-atb status` and .probe/daemon.log)"
    if state.params_lost:
        text += f"; LOST {state.params_lost} op_param.json files"
    if state.unwritten:
        text += f"; NOT IN THE DERIVED FILES: {state.unwritten}"
    return text


def in_force_text(status: dict[str, Any]) -> str:
    """With nothing selected yet: that the config file as it is now is in force, so a
    `wait` right after an edit confirms it ("" without a control plane that published
    it, or a file to date it by)."""
    from msprobe_atb.status import state_text

    if not (status["daemon"]["alive"] and status["published"] and status["config_path"]):
        return ""
    try:
        saved = time.strftime("%H:%M:%S", time.localtime(os.stat(status["config_path"]).st_mtime))
    except OSError:
        return ""
    gen = status["generation"]
    alive = [p for p in status["processes"] if p["alive"]]
    applied = sum(p["config_generation"] == gen for p in alive)
    return (f"config in force (the edit saved at {saved}, published as generation {gen}: "
            f"{state_text(status)}); nothing selected by it yet ({len(alive)} process(es) "
            f"alive, {applied} applied it; a process applies an edit at its next op)")


def run(args: argparse.Namespace) -> int:
    from msprobe_atb.tree.cli import find_dump_root, no_control_block

    dump_root = find_dump_root(args.dir)
    problem = no_control_block(args.dir, dump_root)
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_NO_DUMP
    done = wait_reporting(dump_root, args.timeout, "msprobe-atb wait", refusal_ends=True)
    if done is None:
        return EXIT_NO_DUMP
    code, state = done
    if code == EXIT_TIMEOUT:
        print(f"msprobe-atb wait: timed out after {args.timeout:g} s, still waiting for "
              f"{state.waiting_for}" + (f" ({behind_text(state.behind)})" if state.behind
                                        else ""), file=sys.stderr)
        return code
    if code == EXIT_REFUSED:
        print(f"msprobe-atb wait: refused: {state.refused}", file=sys.stderr)
        return code
    procs = state.status["processes"]
    exec_range = state.status["config"]["exec_range"]
    chosen = next_outcome(state.status) if state.status["config"].get("next_request") else None
    if chosen == "" and code == EXIT_OK:
        print(f"{dump_root}: exec_range {exec_range} is in force; no process has begun an "
              "execution since the edit, so no round is chosen yet (each process fixes its "
              "rounds when a model's next execution begins; `wait` again after a request)")
        return code
    if not any(p["tensors_selected"] for p in procs) and code == EXIT_OK:
        print(f"{dump_root}: " + (in_force_text(state.status) or "nothing to wait for: no "
                                   f"tensor selected so far ({len(procs)} process(es) attached)"))
        return code
    print(f"{dump_root}: {'INCOMPLETE' if state.unwritten else 'complete'}: {outcome(state)}"
          + (f" (exec_range {exec_range}: {chosen})" if chosen else ""))
    return code
