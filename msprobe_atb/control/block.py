"""Typed access to the control block (control.h) through the cffi extension."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from msprobe_atb.config.schema import CompiledConfig
from msprobe_atb.control.ext import ControlError, ext
from msprobe_atb.control.probefiles import resolve_dump_root

# Flag bits of struct msp_proc.flags (control.h).
PROC_AWAKE_SEEN = 1
PROC_ABI_MISMATCH = 2
PROC_EXITED = 4
PROC_BAD_BLOCK = 8
PROC_REC_TOO_SMALL = 16
PROC_REC_EXIT_DROP = 32
PROC_MODELS_EXACT = 64  # awake: models' `started` counts the executions begun
REC_STATES = {0: "off", 1: "armed", 2: "flushing", 3: "disarmed"}


@dataclass(frozen=True)
class ProcSlot:
    slot: int
    pid: int
    start_ns: int
    device: int
    abi: int
    flags: int
    ops_seen: int
    tensors_selected: int
    tensors_written: int
    bytes_written: int
    queue_depth: int
    queue_bytes: int
    drops: int
    errors: int
    records: int
    overflow_events: int
    linked: int
    link_refused: int
    host_ns: int
    last_activity_ns: int
    config_generation: int
    rec_state: int = 0
    rec_rounds: int = 0
    rec_bytes: int = 0
    rec_peak_bytes: int = 0
    rec_evicted: int = 0
    rec_lost: int = 0
    rec_flushed: int = 0
    rec_incident: int = 0
    built: int = 0
    # (name, started, executed) per model the process runs (control.h struct msp_proc_model)
    models: tuple[tuple[str, int, int], ...] = ()

    @property
    def exited(self) -> bool:
        return bool(self.flags & PROC_EXITED)


_PROC_FIELDS = [f for f in ProcSlot.__dataclass_fields__ if f not in ("slot", "models")]
_REC_FIELDS = [f for f in CompiledConfig.__dataclass_fields__ if f.startswith("rec_")]


@dataclass(frozen=True)
class Incident:
    """One entry of the block's incident table (control.h struct msp_incident)."""

    seq: int
    t_ns: int
    pid: int
    start_ns: int
    device: int
    round: int
    kind: int
    value: float
    path: str


def dump_root_of(output_root: str | os.PathLike) -> Path:
    """<ATB_OUTPUT_DIR>/atb_dump_data, absolute; a symlink there is resolved."""
    return resolve_dump_root(Path(os.path.abspath(output_root)) / "atb_dump_data")


def _may_open(path: Path) -> None:
    """Raises PermissionError (naming the path) when this user may not open the
    block for reading and writing, as mapping it needs: someone else's dump is
    then said to be so, not reported as a broken block."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
    except PermissionError:
        raise
    except OSError:  # missing, a link, ...: msp_ctl_open says what is wrong
        pass


class ControlBlock:
    """One mapping of <dump_root>/.probe/control.block."""

    def __init__(self, dump_root: str | os.PathLike, create: bool = False):
        self.ffi, self.lib = ext()
        self.dump_root = resolve_dump_root(dump_root)
        if not create:
            _may_open(self.dump_root / ".probe" / "control.block")
        out = self.ffi.new("struct msp_control **")
        err = self.ffi.new("char[]", 1024)
        rc = self.lib.msp_ctl_open(os.fsencode(self.dump_root), int(create), out, err, 1024)
        if rc != 0:
            raise ControlError(self.ffi.string(err).decode(errors="replace"), refused=rc == -2)
        self._ctl = out[0]

    # ---- lifetime ----
    def close(self) -> None:
        if self._ctl is not None:
            self.lib.msp_ctl_close(self._ctl)
            self._ctl = None

    def __enter__(self) -> ControlBlock:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- single words ----
    def _word(self, name: str) -> int:
        return int(self.lib.msp_ctl_get_word(self.ffi.addressof(self._ctl[0], name)))

    def _set_word(self, name: str, value: int) -> None:
        self.lib.msp_ctl_set_word(self.ffi.addressof(self._ctl[0], name), value)

    @property
    def generation(self) -> int:
        return int(self.lib.msp_ctl_generation(self._ctl))

    @property
    def published(self) -> int:
        return self._word("published")

    def reset_published(self) -> None:
        """Makes the next attaching shim wait for a fresh publish (daemon exit)."""
        self._set_word("published", 0)

    @property
    def daemon_pid(self) -> int:
        return self._word("daemon_pid")

    @daemon_pid.setter
    def daemon_pid(self, pid: int) -> None:
        self._set_word("daemon_pid", pid)

    @property
    def stop_requested(self) -> bool:
        return bool(self._word("stop_requested"))

    @stop_requested.setter
    def stop_requested(self, value: bool) -> None:
        self._set_word("stop_requested", int(value))

    @property
    def error_seq(self) -> int:
        return self._word("error_seq")

    # ---- strings ----
    @property
    def error(self) -> str:
        return self.ffi.string(self._ctl.config_error).decode(errors="replace")

    def set_error(self, message: str) -> None:
        """Records a rejected edit (non-empty) or clears it ("")."""
        limit = self.ffi.sizeof(self._ctl.config_error) - 1
        # surrogateescape: a config path that is not UTF-8 is given back as its bytes
        data = message.encode(errors="surrogateescape")
        if len(data) > limit:
            data = data[: limit - 3].decode(errors="ignore").encode() + b"..."
        self.lib.msp_ctl_set_error(self._ctl, data)

    @property
    def config_path(self) -> str:
        return self.ffi.string(self._ctl.config_path).decode(errors="replace")

    @config_path.setter
    def config_path(self, path: str) -> None:
        self.lib.msp_ctl_set_config_path(self._ctl, os.fsencode(path))

    # ---- config ----
    def publish(self, cfg: CompiledConfig) -> None:
        c = self.ffi.new("struct msp_config *")
        c.state = cfg.state
        c.task = cfg.task
        c.exec_mode = cfg.exec_mode
        c.n_ranges = len(cfg.ranges)
        for i, (lo, hi) in enumerate(cfg.ranges):
            c.ranges[i].lo = lo
            c.ranges[i].hi = hi
        c.save_child = cfg.save_child
        c.filter_level = cfg.filter_level
        c.n_ids = len(cfg.ids)
        for i, s in enumerate(cfg.ids):
            c.ids[i] = s.encode()
        c.n_op_names = len(cfg.op_names)
        for i, s in enumerate(cfg.op_names):
            c.op_names[i] = s.encode()
        c.n_devices = len(cfg.devices)
        for i, d in enumerate(cfg.devices):
            c.devices[i] = d
        c.overflow_mode = cfg.overflow_mode
        c.overflow_nums = cfg.overflow_nums
        c.queue_budget_bytes = cfg.queue_budget_bytes
        c.queue_policy = cfg.queue_policy
        c.save_all_stages = cfg.save_all_stages
        for name in _REC_FIELDS:
            setattr(c, name, getattr(cfg, name))
        c.n_model_ranges = len(cfg.model_ranges)
        for i, (model, lo, hi) in enumerate(cfg.model_ranges):
            c.model_ranges[i].model = model.encode(errors="surrogateescape")
            c.model_ranges[i].lo = lo
            c.model_ranges[i].hi = hi
        self.lib.msp_ctl_publish(self._ctl, c)

    def read_config(self) -> tuple[int, CompiledConfig]:
        c = self.ffi.new("struct msp_config *")
        gen = int(self.lib.msp_ctl_read_config(self._ctl, c))
        s = self.ffi.string
        return gen, CompiledConfig(
            state=c.state, task=c.task, exec_mode=c.exec_mode,
            ranges=tuple((c.ranges[i].lo, c.ranges[i].hi) for i in range(c.n_ranges)),
            save_child=c.save_child, filter_level=c.filter_level,
            ids=tuple(s(c.ids[i]).decode(errors="replace") for i in range(c.n_ids)),
            op_names=tuple(s(c.op_names[i]).decode(errors="replace")
                           for i in range(c.n_op_names)),
            devices=tuple(c.devices[i] for i in range(c.n_devices)),
            overflow_mode=c.overflow_mode, overflow_nums=c.overflow_nums,
            queue_budget_bytes=c.queue_budget_bytes, queue_policy=c.queue_policy,
            save_all_stages=c.save_all_stages,
            **{name: getattr(c, name) for name in _REC_FIELDS},
            model_ranges=tuple((self._name(c.model_ranges[i].model), c.model_ranges[i].lo,
                                c.model_ranges[i].hi) for i in range(c.n_model_ranges)),
        )

    def _name(self, chars) -> str:
        return self.ffi.string(chars).decode(errors="surrogateescape")

    # ---- process table ----
    def procs(self) -> list[ProcSlot]:
        """Snapshot of the claimed slots (pid != 0)."""
        out = []
        p = self.ffi.new("struct msp_proc *")
        for i in range(self.lib.MSP_MAX_PROCS):
            if self._ctl.procs[i].pid == 0:
                continue
            self.lib.msp_ctl_read_proc(self._ctl, i, p)
            if p.pid:
                models = tuple((self._name(m.name), int(m.started), int(m.executed))
                               for m in p.models[0:min(int(p.n_models), self.lib.MSP_MAX_MODELS)])
                out.append(ProcSlot(i, *(int(getattr(p, f)) for f in _PROC_FIELDS),
                                    models=models))
        return out

    # ---- flight recorder incidents ----
    @property
    def rec_claimed(self) -> int:
        return self._word("rec_claimed")

    @property
    def rec_suppressed(self) -> int:
        return self._word("rec_suppressed")

    def read_incident(self, seq: int) -> Incident | None:
        """Entry `seq` (from 1) if it is complete, else None."""
        e = self.ffi.new("struct msp_incident *")
        if not self.lib.msp_ctl_read_incident(self._ctl, seq, e):
            return None
        return Incident(seq=seq, t_ns=e.t_ns, pid=e.pid, start_ns=e.start_ns, device=e.device,
                        round=e.round, kind=e.kind, value=float(e.value),
                        path=self.ffi.string(e.path).decode(errors="replace"))

    def claim_incident(self, kind: int, t_ns: int, path: str = "", round: int = -1,
                       value: float = float("nan"), device: int = -1,
                       base: int | None = None, limit: int | None = None,
                       after_seq: int = 2**64 - 1) -> int:
        """Claims the next incident for the control plane or a person (pid 0);
        base/limit default to the recorder config in force. 0 = suppressed."""
        _, cfg = self.read_config()
        e = self.ffi.new("struct msp_incident *")
        e.t_ns, e.kind, e.value, e.round, e.device = t_ns, kind, value, round, device
        data = path.encode(errors="surrogateescape")[: self.ffi.sizeof(e.path) - 1]
        e.path = data
        return int(self.lib.msp_ctl_claim_incident(
            self._ctl, cfg.rec_incident_base if base is None else base,
            cfg.rec_max_incidents if limit is None else limit, after_seq, e))

    def set_eval_ns(self, t_ns: int) -> None:
        """Statistics the shims published before t_ns were evaluated (recorder/evaluate.py)."""
        self._set_word("rec_eval_ns", max(0, t_ns))

    def pending(self, slot: int) -> dict[str, int]:
        """The slot's selected tensors without a record, per round key
        ("{dev}_{pid}/{exec}"; "" for tensors of rounds without an entry)."""
        p = self._ctl.procs[slot]
        mask, claiming = self.lib.MSP_PENDING_COUNT_MASK, self.lib.MSP_PENDING_CLAIMING
        out: dict[str, int] = {}
        for i in range(self.lib.MSP_PENDING_ROUNDS):
            e = p.pending[i]
            state = int(e.state)
            if state & mask and not state & claiming:
                key = os.fsdecode(self.ffi.string(e.key, self.lib.MSP_ROUND_KEY_LEN))
                out[key] = out.get(key, 0) + (state & mask)
        if p.pending_other:
            out[""] = out.get("", 0) + int(p.pending_other)
        return out

    def set_built(self, slot: ProcSlot, offset: int) -> None:
        """Tells a process how many bytes of its record log the derived files
        hold (it waits for them at exit); only while the slot is still its own."""
        p = self._ctl.procs[slot.slot]
        if p.pid == slot.pid and p.start_ns == slot.start_ns:
            p.built = offset

    # ---- used by tests that stand in for the shim ----
    def claim_proc(self, pid: int, start_ns: int) -> int:
        return int(self.lib.msp_ctl_claim_proc(self._ctl, pid, start_ns))

    def release_proc(self, slot: int) -> None:
        self.lib.msp_ctl_release_proc(self._ctl, slot)

    def set_proc_counter(self, slot: int, name: str, value: int) -> None:
        setattr(self._ctl.procs[slot], name, value)
