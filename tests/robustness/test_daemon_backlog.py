"""A daemon with a backlog of record logs: SIGTERM stops it
promptly, the backlog kept in the logs, and SIGKILL mid-append loses nothing;
either way a later `rebuild` or daemon gives the files an uninterrupted rebuild
gives, and the files left in between are consistent.

The backlog is made, not recorded: record logs in the shim's layout (as the
load generator's show it: an attach record, tensor and param records with one
`seq` a process, a round record after each round's records, an exit record)
for processes that have ended and have no control-block slot, so a daemon or
`rebuild` builds them whole. A daemon builds ~100k records a second: the
backlog is several times what it reads before it first writes the tree, so
each interruption lands with most of it still to build (asserted)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cp_helpers import DaemonProc
from robust_helpers import base_env, cli, derived_files, fill
from testkit import DERIVED, manifest_rows, round_counts, scratch_dir, wait_until

from msprobe_atb.tree import progress

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

PROCS = 3
ROUNDS = 1500  # a process: ~180 records a round, ~540k records, ~170 MB in all
LAYERS = 2
CHILDREN = ["RmsNormOperation", "LinearOperation", "SplitOperation", "RopeOperation",
            "SelfAttentionOperation", "LinearOperation", "ElewiseOperation",
            "RmsNormOperation", "LinearOperation", "ActivationOperation", "LinearOperation",
            "ElewiseOperation"]
ROWS = LAYERS * (2 + 3 * len(CHILDREN))  # tensors a round
START_NS = 1_000_000_000_000_000_000  # long before any live process: none of them is alive
PID = 4_000_000


def _hex(x: float) -> str:
    """A double as the shim writes it: float.hex less its trailing zero digits."""
    m = re.fullmatch(r"(-?0x[01])\.([0-9a-f]*?)0*p(.*)", x.hex())
    return f"{m.group(1)}{'.' + m.group(2) if m.group(2) else ''}p{m.group(3)}"


MEANS = [_hex((1 + i / 64) * 2 ** -10) for i in range(64)]
GRAPH = json.dumps({"opName": "Decoder_layer_0", "opType": "Decoder_layer", "inTensorNum": 1,
                    "outTensorNum": 1, "nodes": [
                        {"opName": f"{op}_0_{i}", "opType": op, "inTensorIds": [i],
                         "outTensorIds": [i + 1], "param": {}}
                        for i, op in enumerate(CHILDREN)]})


def _tensor(t: int, seq: int, path: str) -> str:
    return (f'{{"k":"tensor","t":{t},"seq":{seq},"path":"{path}","format":2,"dtype":1,'
            f'"dims":"1,8192","size":16384,"task":"statistics","file":"none","stats":'
            f'{{"count":8192,"max":"0x1.8p+1","min":"-0x1.8p+1","mean":"{MEANS[seq % 64]}",'
            f'"norm":"0x1.4p+6","nan":0,"pinf":0,"ninf":0,"zero":{seq % 7}}}}}\n')


def _round(rnd: str) -> list[tuple[str, str]]:
    """A round's records in the order the shim writes them, as (kind, path): per
    layer, its inputs, each child op's tensors and op_param.json, its output."""
    out = []
    for layer in range(LAYERS):
        op = f"{rnd}/{layer}_Decoder_layer"
        out.append(("tensor", f"{op}/before/intensor0.bin"))
        for i, child in enumerate(CHILDREN):
            c = f"{op}/{i}_{child}"
            out += [("tensor", f"{c}/before/intensor0.bin"),
                    ("tensor", f"{c}/before/intensor1.bin"),
                    ("tensor", f"{c}/after/outtensor0.bin"), ("param", f"{c}/op_param.json")]
        out.append(("tensor", f"{op}/after/outtensor0.bin"))
    return out


def write_log(records: Path, output: Path, dev: int) -> int:
    """One ended process's record log; returns its lines."""
    pid, start = PID + dev, START_NS + dev
    t, seq, tensors, params = start, 0, 0, 0
    lines = [f'{{"k":"attach","t":{t},"pid":{pid},"start_ns":{start},"abi":1,"host_abi":1,'
             f'"output":"{output}","config":"{output}/config.json","exe":"/synthetic/atb"}}\n',
             json.dumps({"k": "graph", "t": t + 1, "name": "Decoder_layer_0", "dev": dev,
                         "json": GRAPH}, separators=(",", ":")) + "\n"]
    n = 0
    with open(records / f"{pid}-{start}.jsonl", "w") as f:
        for r in range(ROUNDS):
            rnd = f"{dev}_{pid}/{r}"
            for kind, path in _round(rnd):
                t += 1000
                if kind == "param":
                    lines.append(f'{{"k":"param","t":{t},"seq":{seq},"path":"{path}",'
                                 '"file":"json"}\n')
                    params += 1
                else:
                    lines.append(_tensor(t, seq, path))
                    tensors += 1
                seq += 1
            t += 1000
            lines.append(f'{{"k":"round","t":{t},"round":"{rnd}"}}\n')
            if len(lines) > 20000:
                n += len(lines)
                f.write("".join(lines))
                lines = []
        lines.append(f'{{"k":"exit","t":{t + 1000},"drained":true,"lost":0,"ops_seen":'
                     f'{params + LAYERS * ROUNDS},"tensors_selected":{tensors},'
                     f'"tensors_written":{tensors},"bytes_written":0,"drops":0,"errors":0,'
                     f'"overflow_events":0,"unrecorded":{{}}}}\n')
        n += len(lines)
        f.write("".join(lines))
    return n


@dataclass
class Backlog:
    records: Path  # the record logs, untouched
    lines: int  # in all of them
    files: dict[str, bytes]  # the derived files of an uninterrupted rebuild
    manifest: object  # its manifest rows (testkit.manifest_rows)

    def copy(self, out: Path) -> Path:
        """A fresh output dir holding the backlog; its dump root."""
        root = out / "atb_dump_data"
        shutil.copytree(self.records, root / ".probe" / "records")
        return root


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    yield from scratch_dir(tmp_path_factory.mktemp("backlog") / "fs", 4 << 20)


@pytest.fixture(scope="module")
def backlog(scratch) -> Backlog:
    made = scratch / "made" / "atb_dump_data" / ".probe" / "records"
    made.mkdir(parents=True)
    lines = sum(write_log(made, scratch / "made", dev) for dev in range(PROCS))
    ref = scratch / "reference"
    root = Backlog(made, lines, {}, None).copy(ref)
    r = cli("rebuild", str(ref))
    assert r.returncode == 0, r.stderr
    files = derived_files(root)
    markers = [json.loads(v) for k, v in files.items() if k.endswith("ROUND_COMPLETE.json")]
    assert len(markers) == PROCS * ROUNDS and all(m["rows"] == ROWS for m in markers)
    return Backlog(made, lines, files, manifest_rows(root))


@pytest.fixture
def out(scratch, request):
    d = scratch / request.node.name
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)  # ~300 MB of the module's tmpfs


class Watch:
    """A daemon seen from outside: the records its built.json says are in the
    derived files, the bytes it has written (its CSV appends above all), and
    what it had written when its first write of the tree was seen."""

    def __init__(self, daemon: DaemonProc, root: Path):
        self.daemon, self.root = daemon, root
        self.written_at_first: int | None = None

    def built(self) -> int | None:
        """None before this daemon wrote a built.json."""
        p = progress.read(self.root)
        return sum(p.records.values()) if p and p.daemon_pid == self.daemon.proc.pid else None

    def written(self) -> int:
        try:
            with open(f"/proc/{self.daemon.proc.pid}/io") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
        except (OSError, StopIteration):
            return 0

    def moved(self) -> bool:
        """The daemon has written the tree once (built.json moved)."""
        if self.written_at_first is None and self.built():
            self.written_at_first = self.written()
        return self.written_at_first is not None

    def until(self, ready: Callable[[Watch], bool], what: str) -> None:
        """Polls every few ms until ready(self); the daemon must not have ended by
        then (it would have built the whole backlog)."""
        def go() -> bool:
            assert self.daemon.proc.poll() is None, (
                f"the daemon exited before {what}: {self.daemon.errlog.read_text()[-2000:]}")
            return ready(self)

        wait_until(go, timeout=120, step=0.005, what=what)


def _consistent(root: Path, backlog: Backlog, when: str, killed: bool = False) -> int:
    """The files an interrupted daemon left. A round with a ROUND_COMPLETE.json
    is complete: its marker and both CSVs are those of an uninterrupted rebuild
    (the processes have ended, so a complete round never changes). Every other
    round's statistic.csv and statistic_extra.csv have as many rows, but after a
    SIGKILL one of them at most: the pair the daemon was writing (two files
    cannot change as one; the next daemon writes it anew). Returns the rounds
    with a marker."""
    complete, torn = 0, []
    for rnd, (stat, extra, marker) in round_counts(root).items():
        if marker is None:
            if stat != extra:
                torn.append(f"{rnd}: statistic.csv has {stat} rows, statistic_extra.csv {extra}")
            continue
        complete += 1
        for name in DERIVED:
            rel = f"data/{rnd}/{name}"
            assert (root / rel).read_bytes() == backlog.files[rel], (
                f"{when}: {rnd} has a ROUND_COMPLETE.json ({marker} rows), but its {name} is not"
                f" the complete round's ({stat} rows in statistic.csv; {ROWS} in a round)")
    assert len(torn) <= killed, f"{when}: " + "; ".join(torn)
    return complete


def _assert_as_uninterrupted(root: Path, backlog: Backlog) -> None:
    files = derived_files(root)
    assert files.keys() == backlog.files.keys()
    differ = sorted(k for k in files if files[k] != backlog.files[k])
    assert not differ, f"{len(differ)} files differ from an uninterrupted rebuild: {differ[:5]}"
    assert manifest_rows(root).equals(backlog.manifest)


def test_sigterm_stops_a_daemon_with_a_backlog_and_keeps_it(backlog, out):
    root = backlog.copy(out)
    d = DaemonProc(out, None, base_env())
    w = Watch(d, root)
    try:
        w.until(Watch.moved, "the daemon's first write of the tree")
        d.proc.send_signal(signal.SIGTERM)
        assert d.wait_exit(timeout=60) == 0
    finally:
        d.kill()
    assert w.built() < backlog.lines, "SIGTERM did not stop the daemon before it built everything"
    log = (root / ".probe" / "daemon.log").read_text()
    assert re.search(r"stopped with [\d,]+ bytes of the record logs not in the derived files "
                     r"yet: they stay in the logs", log), log[-2000:]
    assert "exiting: stopped by a signal" in log
    assert _consistent(root, backlog, "after SIGTERM") < PROCS * ROUNDS
    r = cli("rebuild", str(out))
    assert r.returncode == 0, r.stderr
    _assert_as_uninterrupted(root, backlog)


# Where each daemon in turn is killed, on the tree the ones before left
KILLS: list[tuple[str, Callable[[Watch], bool]]] = [
    ("4 MiB into its first appends", lambda w: w.written() >= 4 << 20),
    ("just after its first write of the tree", Watch.moved),
    ("8 MiB into its appends after its first write of the tree",
     lambda w: w.moved() and w.written() >= w.written_at_first + (8 << 20)),
]


def test_daemon_killed_mid_append_then_restarted(backlog, out):
    root = backlog.copy(out)
    for what, when in KILLS:
        d = DaemonProc(out, None, base_env())
        w = Watch(d, root)
        try:
            w.until(when, what)
        finally:
            d.kill()
        assert (w.built() or 0) < backlog.lines, f"killed {what}: the daemon had built everything"
        _consistent(root, backlog, f"killed {what}", killed=True)
    d = DaemonProc(out, None, base_env())
    try:
        assert d.wait_exit(timeout=300) == 0
    finally:
        d.kill()
    assert Watch(d, root).built() == backlog.lines
    assert _consistent(root, backlog, "after the last daemon") == PROCS * ROUNDS
    _assert_as_uninterrupted(root, backlog)


def test_rebuild_holds_a_backlog_a_read_at_a_time(backlog, out, monkeypatch):
    """`rebuild` reads the logs a bounded step at a time and writes the tree in
    between, as the daemon does, so the rows it holds do not grow with the
    backlog (read whole, a 300 s two-device serve run's logs took 14.7 GB); its
    files are still an uninterrupted rebuild's."""
    from msprobe_atb.tree import drain
    from msprobe_atb.tree.builder import TreeBuilder

    root = backlog.copy(out)
    read = 4 << 20
    monkeypatch.setattr(drain, "REBUILD_READ_BYTES", read)
    held: list[int] = []
    flush = TreeBuilder.flush

    def counting(self, *args, **kwargs):
        held.append(self.held_bytes())
        return flush(self, *args, **kwargs)

    monkeypatch.setattr(TreeBuilder, "flush", counting)
    drain.rebuild(root)
    logs = sum(p.stat().st_size for p in backlog.records.iterdir())
    assert len(held) >= logs // read // 2, f"{len(held)} writes of the tree for {logs:,} bytes"
    assert max(held) < logs // 2, f"held {max(held):,} bytes of rows of {logs:,} bytes of logs"
    _assert_as_uninterrupted(root, backlog)


def _rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_a_daemon_on_a_full_disk_leaves_the_backlog_in_the_logs(backlog, small_fs):
    """On a disk that is full, a daemon reads the logs no further than its first
    write of the tree that found no room: what it read on would only be held in
    memory (one that read on grew 150 -> 982 MiB in a minute). With no process
    alive it then stops, the backlog in the logs, and once there is room a
    `rebuild` gives the files an uninterrupted rebuild gives."""
    logs = sum(p.stat().st_size for p in backlog.records.iterdir())
    tree = sum(len(b) for b in backlog.files.values())
    fs = small_fs((logs + 2 * tree >> 10) + (64 << 10))  # room for the logs and the tree
    out = fs / "out"
    root = backlog.copy(out)
    filler = fill(fs, 2048)  # 2 MiB left: the first write of the tree fills it
    d = DaemonProc(out, None, base_env())
    try:
        # exited, not reaped: a zombie's /proc/io stays
        wait_until(lambda: os.waitid(os.P_PID, d.proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG),
                   timeout=120, what="the daemon's exit on the full disk")
        read = _rchar(d.proc.pid)
        assert d.wait_exit(timeout=10) == 0
    finally:
        d.kill()
    assert read < logs // 2, f"the daemon read {read:,} bytes of {logs:,} bytes of logs"
    filler.unlink()
    r = cli("rebuild", str(out))
    assert r.returncode == 0, r.stderr
    _assert_as_uninterrupted(root, backlog)
