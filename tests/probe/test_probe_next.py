"""exec_range "next" made concrete by the shim itself: the control plane
publishes a request (next_request, N) and each process fixes its rounds per model at
the first execution of that model it sees begin after the publish, also when it was
asleep (or awake selecting nothing) and counted executions only as they ended. Driven
through the real shim by the tiny ATB stand-in (native/tests/probe_host.cpp)."""

from __future__ import annotations

import json

import pytest
from probe_helpers import Dump

from msprobe_atb.control.block import PROC_MODELS_EXACT, ControlBlock


def setup(op: int) -> list[list[str] | str]:
    """Top-level op `op` set up: IsTensorNeedSave, then UpdateConfig at the end of its
    runner's setup."""
    return [["need", "X", str(op)], "update"]


def run(r: int, op: int) -> list[list[str]]:
    """Top-level op `op` run in round r: its runner asks IsExecuteCountInRange and its
    directory before, after and for its param (docs/atb_hooks.md §5.2)."""
    return [["range", str(r)], ["dir", f"0_7/{r}/{op}_X"]] * 3


def execution(r: int, *, publish: str | None = None) -> list[list[str] | str]:
    """One execution (round r) of model M, ops 1 and 2, as ATB-Models issues it: each
    top-level op set up and run; the end reported by IsReportModelTopoInfo. `publish`:
    the control plane publishes these fields ("key=value ...") between the ops."""
    lines: list[list[str] | str] = []
    for op in (1, 2):
        lines += setup(op) + run(r, op)
        if publish and op == 1:
            lines.append(["publish", *publish.split()])
    return lines + [["topo?", "M"]]


def answers(p) -> list[tuple[int, int]]:
    """(range, dir) per op, in order (the first of each op's three asks, which must
    all agree)."""
    got = [(k, int(v)) for k, _, v in (ln.rpartition("=") for ln in p.stdout.splitlines())
           if k in ("range", "dir")]
    pairs = [(got[i][1], got[i + 1][1]) for i in range(0, len(got), 2)]
    ops = [pairs[i:i + 3] for i in range(0, len(pairs), 3)]
    assert all(len(set(op)) == 1 for op in ops), ops
    return [op[0] for op in ops]


def fixed(dump: Dump) -> list[tuple[str, int, int, int]]:
    with ControlBlock(dump.root, create=False) as block:
        (proc,) = block.procs()
        return [(m.name, m.executed, m.next_request, m.next_first) for m in proc.models]


@pytest.mark.parametrize("before", ["state=0", "state=1 exec=none"], ids=["asleep", "awake_idle"])
def test_the_next_execution_to_begin_is_taken_whole(dump, before):
    """Three executions unseen (asleep), the edit between two executions: the very next
    one (round 3) is dumped whole, and that is the round the process reports."""
    dump.publish({"dump_enable": False})
    script = [["publish", *before.split()]]
    for r in range(3):
        script += execution(r)
    script += [["publish", "state=1", "next=41:1"]]
    for r in (3, 4):
        script += execution(r)
    script += [["sleep", "600"]]  # the monitor says the rounds (every 250 ms)
    p = dump.host(1, script)
    # ops of rounds 0-2 unseen; round 3 whole; round 4 not
    assert answers(p) == [(0, 0)] * 6 + [(1, 1), (1, 1), (0, 0), (0, 0)]
    assert fixed(dump) == [("M", 5, 41, 3)]
    assert "exec_range next:1: dumping the next execution of each model" in p.stdout
    assert "exec_range next: dumping M round 3 (" in p.stdout


def test_an_execution_under_way_at_the_edit_is_not_taken_and_n_counts_on(dump):
    """The edit lands between two ops of round 1: that execution began before it, so
    rounds 2 and 3 are the next two (N=2), whole, and round 4 is not."""
    dump.publish({"dump_enable": False})
    script = execution(0) + execution(1, publish="state=1 next=42:2")
    for r in (2, 3, 4):
        script += execution(r)
    p = dump.host(1, script)
    # round 1's op 2: IsExecuteCountInRange answers for the config's rounds 0-1 (of ops of
    # no model), the dir (round and op) decides
    assert answers(p) == [(0, 0)] * 3 + [(1, 0)] + [(1, 1)] * 4 + [(0, 0)] * 2
    assert fixed(dump) == [("M", 5, 42, 2)]


@pytest.mark.parametrize("edit", ["state=1 next=42:1", "exec=none", "state=0"],
                         ids=["next", "none", "asleep"])
@pytest.mark.parametrize("start", ["asleep", "awake"])
def test_an_edit_during_a_dumped_execution_takes_effect_at_its_end(dump, start, edit):
    """An edit published between two ops of an execution that exec_range
    "next" dumps (its model known, or not yet) changes nothing of that execution: it is
    dumped whole, and the edit takes effect from the next one (another "next" then takes
    round 3). Before, the execution's ops after the edit were not selected: a round
    short of ops, which the control plane then marked complete."""
    dump.publish({"dump_enable": False})
    # awake, the ops are mapped to their model as they run; asleep they are not
    script = [["publish", "state=1", "exec=0,0"]] if start == "awake" else []
    script += execution(0) + [["publish", "state=1", "next=41:2"]] + execution(1)
    script += execution(2, publish=edit) + execution(3) + execution(4)
    p = dump.host(1, script)
    after = [(1, 1)] * 2 if "next" in edit else [(0, 0)] * 2
    first = [(1, 1)] * 2 if start == "awake" else [(0, 0)] * 2
    assert answers(p) == first + [(1, 1)] * 4 + after + [(0, 0)] * 2


def test_an_edit_during_an_execution_dumped_under_all_takes_effect_at_its_end(dump):
    """The same for an execution "all" dumps (its model known from round 0): "none"
    published between its ops stops the dump from the next execution on."""
    script = [["publish", "state=1", "exec=all"]] + execution(0)
    script += execution(1, publish="exec=none") + execution(2)
    p = dump.host(1, script)
    assert answers(p) == [(1, 1)] * 4 + [(0, 0)] * 2


def test_a_process_started_under_next_takes_its_first_executions(dump):
    """No execution ended before the edit (the config was in force from the start):
    each model's first N rounds."""
    dump.publish({"dump_enable": False})
    script = [["publish", "state=1", "next=43:1"]] + execution(0) + execution(1)
    p = dump.host(1, script)
    assert answers(p) == [(1, 1)] * 2 + [(0, 0)] * 2
    assert fixed(dump) == [("M", 2, 43, 0)]


def test_an_execution_of_a_model_not_known_yet_is_reported_while_it_runs(dump):
    """Asleep, ops are not mapped: the first execution after the edit is dumped before
    its model is known (at its end); meanwhile the process says one is being dumped."""
    dump.publish({"dump_enable": False})
    script = execution(0) + [["publish", "state=1", "next=44:1"]] + execution(1)[:-1]
    p = dump.host(1, script)
    assert answers(p) == [(0, 0)] * 2 + [(1, 1)] * 2
    with ControlBlock(dump.root, create=False) as block:
        (proc,) = block.procs()
    assert proc.next_picking == 1 and proc.models[0].next_request == 0
    # at its end the model is known and fixes its round; nothing is being dumped then
    dump.host(1, [["publish", "state=0"]] + execution(0) + [["publish", "state=1", "next=45:1"]]
              + execution(1))
    with ControlBlock(dump.root, create=False) as block:
        now = next(p for p in block.procs() if p.pid != proc.pid)
    assert now.next_picking == 0 and now.models[0][3:] == (45, 1)


@pytest.mark.parametrize("between", [[], [["publish", "state=1", "ids=1"]],
                                     [["publish", "state=0"], ["need", "X", "1"],
                                      ["publish", "state=1", "ids=2"]]])
def test_setups_left_inline_still_begin_each_execution(dump, between):
    """Awake, a top-level op's setup stays in the adapter when its model needs no note (its
    execution under way began, or the op was noted and is not mapped yet): the models'
    counts are those of a note at every setup. Each execution begins at its first op, ops
    set up twice in one execution begin nothing more, and so after a config edit or a
    sleep between executions; the process dies in the third (status: running)."""
    dump.publish({"dump_enable": True, "ids": "2"})
    twice = [["need", "X", "1"], ["need", "X", "1"], ["need", "X", "2"], ["need", "X", "2"]]
    script = twice + [["topo?", "M"]] + twice + [["topo?", "M"]] + between + twice
    dump.host(1, script)
    with ControlBlock(dump.root, create=False) as block:
        (proc,) = block.procs()
    assert proc.flags & PROC_MODELS_EXACT
    assert [(m.name, m.started, m.executed) for m in proc.models] == [("M", 3, 2)]


@pytest.mark.parametrize("edit", ["state=1 next=42:1", "exec=none"], ids=["next", "none"])
@pytest.mark.parametrize("start", ["asleep", "awake"])
def test_async_execute_ends_an_execution_after_its_last_op_ran(dump, start, edit):
    """ATB's async execute (docs/atb_hooks.md §9): the caller sets up every node and
    reports the end (IsReportModelTopoInfo) while the worker has not run them yet. An
    edit followed then (here by another thread's UpdateConfig, as the monitor would)
    waits until both ops asked their directories: round 1 is dumped whole, and the edit
    takes effect from round 2. Before, the end alone released the edit, and round 1's
    ops answered under it: a round with none of its ops."""
    dump.publish({"dump_enable": False})
    script = [["publish", "state=1", "exec=0,0"]] if start == "awake" else []
    script += execution(0) + [["publish", "state=1", "next=41:1"]]
    script += setup(1) + setup(2) + [["topo?", "M"], ["publish", *edit.split()],
                                     ["thread", "update"]]
    script += run(1, 1) + run(1, 2) + execution(2)
    p = dump.host(1, script)
    first = [(1, 1)] * 2 if start == "awake" else [(0, 0)] * 2
    after = [(1, 1)] * 2 if "next" in edit else [(0, 0)] * 2
    assert answers(p) == first + [(1, 1)] * 2 + after


@pytest.mark.parametrize("held_by", ["exec=all", "next=41:2"])
def test_an_execution_that_never_ends_holds_no_edit_past_its_models_next(dump, held_by):
    """Round 1 fails after its first op (ATB-Models then reports no end); "none" is
    published meanwhile. The model's next execution (its first op set up again, after
    other runners on its thread) ends round 1: the edit is in force from round 2's
    first op. Before, round 2 counted as part of round 1, dumped under the old config,
    and the edit waited for its end."""
    script = [["publish", "state=1", "exec=0,0"]] + execution(0)
    script += [["publish", "state=1", *held_by.split()]] + setup(1) + run(1, 1)
    script += [["publish", "exec=none"]] + execution(2)
    p = dump.host(1, script)
    assert answers(p) == [(1, 1)] * 3 + [(0, 0)] * 2
    with ControlBlock(dump.root, create=False) as block:
        (proc,) = block.procs()
    assert [(m.name, m.started, m.executed) for m in proc.models] == [("M", 3, 3)]


def test_a_held_execution_that_calls_no_hook_is_cut_by_the_monitor(dump):
    """Round 1, dumped under "all", fails after its first op and the service then runs
    nothing: the "none" published meanwhile would wait forever. Once the executions
    made no progress for MSPROBE_ATB_HOLD_IDLE_MS, the monitor ends round 1, says so
    (a `cut` record, which its marker carries, and the console) and applies the edit:
    round 1's late op answers under it."""
    from msprobe_atb.tree.drain import rebuild

    save = ["save", "2", "0", "4", "fill:1:16", "0_7/1/1_X/after/outtensor0.bin"]
    script = [["publish", "state=1", "exec=0,0"]] + execution(0)
    script += [["publish", "state=1", "exec=all"]] + setup(1) + run(1, 1) + [save]
    script += [["publish", "exec=none"], ["sleep", "2000"]] + run(1, 2)
    p = dump.host(1, script, MSPROBE_ATB_HOLD_IDLE_MS="300")
    assert answers(p) == [(1, 1)] * 3 + [(0, 0)]
    (cut,) = [r for r in dump.records() if r["k"] == "cut"]
    assert cut["round"].endswith("/1") and "called no hook for 300 ms" in cut["why"]
    assert f"round {cut['round']} cut: " in p.stderr
    with ControlBlock(dump.root, create=False) as block:
        rebuild(dump.root, block)
    (marker,) = dump.data.glob("*/1/ROUND_COMPLETE.json")
    assert json.loads(marker.read_text())["cut"] == cut["why"]
