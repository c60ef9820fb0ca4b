"""The control-plane daemon of one output dir.

Start-up is kept short because a shim may be waiting for the first publish:
the config is read and published before anything heavier (watchdog, the
record logs) is touched.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from msprobe_atb.control.block import ControlBlock, ControlError, dump_root_of
from msprobe_atb.control.liveness import is_alive, pid_alive
from msprobe_atb.control.lockfile import LOCK_NAME, try_lock
from msprobe_atb.control.probefiles import open_probe_file, same_file
from msprobe_atb.daemon.controller import Controller
from msprobe_atb.daemon.watcher import MISSING, ConfigWatcher, Unusable
from msprobe_atb.tree import fsio, progress  # light: the heavy tree modules load later
from msprobe_atb.tree.fsio import sweep_stale_temps
from msprobe_atb.tree.killed import close_killed
from msprobe_atb.tree.records import ProcKey

log = logging.getLogger("msprobe_atb")

LOG_NAME = "daemon.log"
RECORD_POLL_S = 0.1
# New rows reach statistic.csv within FLUSH_EVERY_S + RECORD_POLL_S; an exit
# record or a process found dead flushes at once (its markers); without news the
# tree is still written every IDLE_FLUSH_S (liveness can complete rounds).
# A flush after each read that fed rows: at 40k records/s, 0.25 s between flushes
# held twice the records back (median 0.24 s of them, 0.12 now) for no CPU saved
# that could be measured (a flush's cost is mostly its rows').
FLUSH_EVERY_S = 0.1
IDLE_FLUSH_S = 1.0
LIVENESS_EVERY_S = 0.5
LINGER_S = 2.0
# After a write of the tree, at most this often: the freed memory of the rounds
# written goes back to the system (glibc keeps it otherwise, scattered in its
# heap, and the daemon's RSS creeps up round after round: +66 MB over 700 rounds).
TRIM_EVERY_S = 2.0
# Record-log bytes fed per loop turn (about 50,000 records): a restart with a long
# backlog must not keep config edits waiting; while behind, the tree is written
# less often.
RECORD_BUDGET = 16 << 20
BACKLOG_FLUSH_EVERY_S = 2.0
# ... or sooner, once the rows read and not yet written take this much memory
# in the kernel (a backlog read at ~250k rows/s would hold ~360 MB in 2 s).
FLUSH_HELD_BYTES = 16 << 20


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")


class OneLineFormatter(logging.Formatter):
    """Names from the model reach the messages: a newline in one must not split
    or forge log lines, so control characters are written as \\xNN."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", record.message)
        return super().formatMessage(record)


def setup_logging(dump_root: Path, foreground: bool) -> None:
    log.setLevel(logging.INFO)
    log.propagate = False
    fmt = OneLineFormatter("%(asctime)s [%(levelname)s] pid %(process)d: %(message)s")
    # backslashreplace: a config path that is not UTF-8 must not cost a log line
    handler = logging.StreamHandler(os.fdopen(open_log(dump_root), "a", encoding="utf-8",
                                              errors="backslashreplace"))
    handler.setFormatter(fmt)
    log.addHandler(handler)
    if foreground:
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(OneLineFormatter("msprobe-atb daemon: %(message)s"))
        log.addHandler(err)


def open_log(dump_root: Path) -> int:
    """daemon.log for appending, from the verified .probe fd: a link planted
    there is replaced, never written through."""
    fd, replaced = open_probe_file(dump_root, LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    if replaced:
        os.write(fd, f"{time.strftime('%Y-%m-%d %H:%M:%S')} [WARNING] pid {os.getpid()}: "
                 f"{dump_root}/.probe/{LOG_NAME} was a link or not a regular file; replaced it "
                 "with a fresh file (never followed)\n".encode())
    return fd


def detach(dump_root: Path) -> None:
    """Leaves the host's session and terminal; stray output goes to the log.
    The lock's open file description is inherited, so the lock stays held."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    out = open_log(dump_root)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def release_freed_memory() -> None:
    """malloc_trim(0): glibc gives its free pages back (no-op elsewhere)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 1 << 20


def map_big_buffers() -> None:
    """Buffers from 1 MiB up get pages of their own, given back when freed.
    glibc raises this threshold (up to 32 MiB) each time such a buffer is
    freed, after which the daemon's big buffers (record chunks, the rows of a
    flush, manifest columns) come from its heap, whose free holes stay
    resident: 70-85 MB of them over 3M records. A fixed threshold turns that
    off (no-op elsewhere); 256 KiB would cost 10% more CPU in page faults, for
    buffers of a few hundred KB the heap reuses well."""
    try:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        pass


def lock_replaced(lock_fd: int, dump_root: Path) -> bool:
    """True if our daemon.lock is no longer the file at its path: the dump
    root was removed (and maybe re-created, with a daemon of its own)."""
    return not same_file(lock_fd, dump_root, LOCK_NAME)


def _wake_on_signals(wake: threading.Event) -> None:
    """Every handled signal sets `wake`, from a thread: the C-level handler writes to a
    pipe (signal.set_wakeup_fd) that the thread reads. A Python handler must not set the
    event itself: it runs in the main thread, which may hold the event's lock at that
    moment (in wait() or clear()), and would wait for it forever. A process's exit
    doorbell arrives at any moment, so that hang was real (a daemon that never exited)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)

    def pump() -> None:
        while os.read(r, 512):
            wake.set()

    threading.Thread(target=pump, name="signal-wake", daemon=True).start()


class Daemon:
    def __init__(self, dump_root: Path, block: ControlBlock, config_path: Path | None,
                 lock_fd: int | None = None):
        self.dump_root = dump_root
        self.block = block
        self.lock_fd = lock_fd
        self.wake = threading.Event()
        self.stopping = False
        self.controller = Controller(block, config_path)
        self.watcher = None
        if config_path is not None:
            self.watcher = ConfigWatcher(
                config_path, _env_float("MSPROBE_ATB_POLL_S", 5.0),
                os.environ.get("MSPROBE_ATB_NO_EVENTS") != "1", self.wake)
        self.idle_exit_s = _env_float("MSPROBE_ATB_IDLE_EXIT_S", 60.0)
        self._progress = b""
        self._trimmed = 0.0
        self._full_said = False  # the disk is full and the logs wait: said
        self._progress_error = ""  # why the last write of built.json failed, said once
        self._built = progress.Progress(os.getpid())
        self.golden_said = False

    def check_config(self, settle: bool) -> None:
        if self.watcher is None:
            if self.controller.published is None:
                self.controller.missing()
            return
        if settle:
            self.watcher.settle()
        content = self.watcher.check()
        if content is MISSING:
            self.controller.missing()
        elif isinstance(content, Unusable):
            self.controller.refuse(content.problem)
        elif content is not None:
            self.controller.apply(content)

    def alive_procs(self) -> list[tuple[int, int]]:
        alive = set()
        for slot in self.block.procs():
            if not slot.exited and is_alive(slot.pid, slot.start_ns):
                alive.add((slot.pid, slot.start_ns))
        for key, p in self.builder.procs.items():
            if not p.exited and is_alive(key.pid, key.start_ns):
                alive.add((key.pid, key.start_ns))
        return sorted(alive)

    def run(self) -> int:
        started = time.monotonic()
        # built.json first, while the disk has room: on a disk the dump fills, it is
        # then kept current in place (tree/progress.py)
        self.write_progress()
        self.check_config(settle=False)  # the first publish, as early as possible
        from msprobe_atb.tree.builder import TreeBuilder
        from msprobe_atb.tree.drain import BlockOracle, RecordDrain

        self.oracle = BlockOracle(self.block)
        # a finished commit wakes the loop, which tells the waiting processes
        self.builder = TreeBuilder(self.dump_root, self.oracle, on_commit=self.wake.set)
        self.drain = RecordDrain(self.dump_root, self.builder)
        from msprobe_atb.recorder.evaluate import Evaluator

        self.evaluator = Evaluator(self.block, self.builder.incidents)
        if self.watcher is not None:
            self.watcher.start_events()
        last_flush = last_live = 0.0
        last_alive: float | None = None
        reason = "stopped by a signal"
        behind = pending = False
        exits = 0
        alive_before: list[tuple[int, int]] = []
        while not self.stopping:
            self.wake.wait(0 if behind else RECORD_POLL_S)
            self.wake.clear()
            if self.lock_fd is not None and lock_replaced(self.lock_fd, self.dump_root):
                # Nothing to write into a removed tree, and a flush by path
                # would land stale state in its successor.
                self.finish_removed()
                return 0
            now = time.monotonic()
            if self.watcher is not None and self.watcher.due(now):
                self.check_config(settle=True)
            self.oracle.refresh(self.builder.last_seqs())  # before the read: see BlockOracle
            # The disk is full: rows read now would only be held in memory (a
            # daemon that read on grew 150 -> 982 MiB in a minute). The logs keep
            # them until a write finds room again, tried every backlog flush.
            full = self.builder.out_of_space
            fed = 0 if full else self.drain.poll(RECORD_BUDGET)
            self.evaluate()
            behind = fed >= RECORD_BUDGET
            pending = pending or fed > 0
            every = BACKLOG_FLUSH_EVERY_S if behind or full else FLUSH_EVERY_S
            if (self.builder.exits_seen != exits or now - last_flush >= IDLE_FLUSH_S
                    or self.builder.said_done or ((pending or full) and now - last_flush >= every)
                    or (behind and self.builder.held_bytes() >= FLUSH_HELD_BYTES)):
                exits = self.builder.exits_seen
                self.flush(idle=not pending)
                last_flush, pending = now, False
            # not between a read and its flush: collecting a commit while rows read
            # are not written yet left rows out of statistic.csv (make fuzz-native)
            elif self.builder.committer.ready() and not pending:
                self.flush_written()
            elif self.watcher is not None:
                self.write_progress()  # a config edit handled: `wait` may go on
            if now - last_live < LIVENESS_EVERY_S:
                continue
            last_live = now
            close_killed(self.block, self.builder, self.drain)
            alive = self.alive_procs()
            if len(alive) < len(alive_before):
                self.flush()  # a process died: its rounds are complete now
                last_flush = now
            alive_before = alive
            if alive:
                last_alive = now
                continue
            if (behind or not self.drain.drained()) and not full:
                continue  # (a full disk: the rest waits in the logs for the next reader)
            # Shims claim their slot before starting the daemon, so a process
            # that came and went before our first look still shows up here.
            attached = last_alive is not None or bool(self.builder.procs) or bool(
                self.block.procs())
            quiet_s = now - (last_alive if last_alive is not None else started)
            if attached and (self.block.stop_requested or quiet_s >= LINGER_S):
                reason = "no attached process is alive and every record is drained"
                break
            if not attached and self.block.stop_requested:
                reason = "asked to stop (unload) and no process is attached"
                break
            if not attached and now - started >= self.idle_exit_s:
                reason = f"no process attached within {self.idle_exit_s:g} s"
                break
        self.finish(reason)
        return 0

    def flush(self, idle: bool = False, wait: bool = False) -> None:
        """A write of the tree; its markers and manifest files are written beside
        what comes next (flush_written) unless `wait`."""
        self.builder.incidents.add_block(self.block)
        self.builder.flush(idle, wait)
        self.flush_written()
        if self.builder.out_of_space != self._full_said:
            self._full_said = self.builder.out_of_space
            if self._full_said:
                log.warning("the disk is full: the record logs are read no further until the "
                            "derived files can be written again (tried every %g s); what the "
                            "processes record waits in the logs", BACKLOG_FLUSH_EVERY_S)
            else:
                log.info("the derived files are written again: reading the record logs on")
        now = time.monotonic()
        if now - self._trimmed >= TRIM_EVERY_S:
            self._trimmed = now
            release_freed_memory()

    def flush_written(self) -> None:
        """The markers and manifest files written by now taken in, built.json told
        what the tree holds, and each process how far its files are built."""
        self.builder.committer.collect()
        self._built = self.drain.progress(os.getpid())
        self.write_progress()
        committing = self.builder.committing()
        for slot in self.block.procs():  # a process waits for its files at exit
            key = ProcKey(slot.pid, slot.start_ns)
            p = self.builder.procs.get(key)
            # not while its files could not be written (a full disk): it says so;
            # nor while its markers are being written: they are its files too
            built = self.builder.built(key)[0] if p is not None else 0
            if (p is not None and slot.built < built and key not in self.builder.unwritten_procs
                    and key not in committing):
                self.block.set_built(slot, built)

    def write_progress(self) -> None:
        """.probe/built.json, when it changed (what `msprobe-atb wait` reads): the
        tree as of the last flush, and the config content handled by now."""
        data = self._built
        data.config_sha256 = self.watcher.digest if self.watcher is not None else None
        if data.to_bytes() != self._progress:
            try:
                progress.write(self.dump_root, data)
                self._progress = data.to_bytes()
                if self._progress_error:
                    log.info("wrote %s again", progress.path_of(self.dump_root))
                self._progress_error = ""
            except (OSError, fsio.UnsafePath) as exc:
                if str(exc) != self._progress_error:  # once per reason, not per loop
                    log.warning("cannot write %s: %s (`msprobe-atb wait` waits until it "
                                "can, or until the control plane exits)",
                                progress.path_of(self.dump_root), exc)
                self._progress_error = str(exc)

    def _backlog(self) -> str:
        """What of the record logs is not in the derived files, in words ("" none)."""
        unbuilt = 0
        for key, tailer in self.drain.tailers.items():
            try:
                size = os.stat(tailer.path).st_size
            except OSError:
                continue
            unbuilt += max(0, size - self.builder.built(key)[0])
        return f"{unbuilt:,} bytes" if unbuilt else ""

    def evaluate(self) -> None:
        """The control plane's recorder triggers (golden, growth_over)."""
        from msprobe_atb.config.schema import ConfigError

        try:
            golden = self.controller.golden_of(self.controller.good)
        except ConfigError as exc:
            golden = None
            if not self.golden_said:
                self.golden_said = True
                log.error("recorder: the golden trigger is off: %s", exc)
        self.evaluator.poll(self.controller.good, golden, self.controller.armed_ns)

    def finish_removed(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        log.info("exiting: %s was removed or replaced; the shims attach to a fresh tree "
                 "and start a new daemon", self.dump_root)

    def finish(self, reason: str) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        self.oracle.refresh()
        if not self.stopping:  # stopped by a signal, a backlog stays in the logs
            from msprobe_atb.tree.drain import read_through

            if not self.builder.out_of_space:  # else it stays in the logs too
                read_through(self.drain)
            close_killed(self.block, self.builder, self.drain)
        self.flush(idle=True, wait=True)
        behind = self._backlog()
        if behind:
            log.info("stopped with %s of the record logs not in the derived files yet: they "
                     "stay in the logs; the next control plane (or `msprobe-atb rebuild`) "
                     "builds them", behind)
        # The next process to attach must wait for a fresh publish by the next
        # daemon rather than trust this daemon's last config.
        if not self.alive_procs():
            self.block.reset_published()
        if self.block.daemon_pid == os.getpid():
            self.block.daemon_pid = 0
        # The stop request was for this daemon; shims do not start a daemon
        # while it is set, so the next session must not inherit it.
        self.block.stop_requested = False
        log.info("exiting: %s", reason)


def run_daemon(output: str, config: str | None, foreground: bool) -> int:
    dump_root = dump_root_of(output)
    try:
        os.makedirs(dump_root.parent, mode=0o750, exist_ok=True)
        block = ControlBlock(dump_root, create=True)
    except (ControlError, OSError) as exc:
        print(f"msprobe-atb daemon: {exc}", file=sys.stderr)
        return 1
    try:
        lock = try_lock(dump_root)
    except OSError as exc:
        print(f"msprobe-atb daemon: {exc.strerror}", file=sys.stderr)
        return 1
    if lock is None:
        return 0  # another daemon serves this output dir
    if not foreground:
        detach(dump_root)
    map_big_buffers()
    # one thread of polars (the manifest's writer, loaded later): the daemon
    # keeps pace on one core, and a merge's many-threaded streaming held up to
    # 250 MB more than one thread's, in a daemon that must stay in flat memory
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    setup_logging(dump_root, foreground)
    config_path = Path(os.path.abspath(config)) if config else None
    if block.daemon_pid not in (0, os.getpid()):
        # a daemon that exits clears its pid: this one was killed, maybe mid-write of a
        # derived file; its temporaries (and those of shims killed meanwhile) would stay
        # beside the files, where only `rebuild` removed them
        swept = sweep_stale_temps(dump_root, pid_alive)
        if swept:
            log.info("removed %d temporary file(s) that killed writers left", swept)
    block.daemon_pid = os.getpid()
    block.stop_requested = False
    block.config_path = str(config_path or "")
    daemon = Daemon(dump_root, block, config_path, lock)

    def on_signal(signum, _frame) -> None:
        daemon.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # a process at exit rings (native/core/lifecycle/exitdrain.c): read its exit record now,
    # not at the next poll, since it waits for its files
    signal.signal(signal.SIGWINCH, lambda _signum, _frame: None)
    _wake_on_signals(daemon.wake)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log.info("started for %s, config %s", dump_root, config_path or "(none)")
    link = Path(os.path.abspath(output)) / "atb_dump_data"
    if link != dump_root:
        log.info("%s is a symlink: serving its target %s (resolved once, at start)", link,
                 dump_root)
    try:
        return daemon.run()
    except Exception:
        log.exception("daemon failed; the record logs are intact, run `msprobe-atb rebuild`")
        return 1
    finally:
        block.close()
        os.close(lock)
