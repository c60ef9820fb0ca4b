"""Typed access to the control block (control.h) through the cffi extension."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

from msprobe_atb.config.compile import CompiledConfig
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


class ProcModel(NamedTuple):
    """One model a process runs (control.h struct msp_proc_model)."""

    name: str
    started: int  # executions begun (exact only with PROC_MODELS_EXACT)
    executed: int  # executions ended
    next_request: int = 0  # exec_range "next": the edit whose rounds are fixed below
    next_first: int = 0  # its first round (of next_count)


HEAD_IDLE = 2**64 - 1  # a writer_head of a writer with nothing (control.h MSP_HEAD_IDLE)


@dataclass(frozen=True)
class ProcSlot:
    """One claimed slot: `slot`, its numbers (the plain fields of struct msp_proc, by
    their control.h names: layout_fields() copies them), its models and its writers'
    heads."""

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
    next_picking: int = 0  # exec_range "next": executions of models not known yet, dumping
    params_lost: int = 0  # op_param.json files not written
    params_unrecorded: int = 0  # of them, those whose own record found no room
    pending_other: int = 0
    n_writers: int = 0  # writer threads started
    models: tuple[ProcModel, ...] = ()
    # per writer, the lowest seq of the items handed to it whose records are not in the
    # log yet, HEAD_IDLE if none (docs/contracts.md §3: what a reader may conclude)
    writer_head: tuple[int, ...] = ()

    @property
    def exited(self) -> bool:
        return bool(self.flags & PROC_EXITED)


@dataclass(frozen=True)
class StructFields:
    """The fields of one control.h struct, as the cffi extension reads them."""

    numbers: tuple[str, ...]  # plain numbers, copied by name (padding and counts left out)
    lists: tuple[str, ...]  # arrays with a count n_<name>
    arrays: tuple[str, ...]  # arrays without one (strings, tables read on their own)


@cache
def layout_fields(struct: str) -> StructFields:
    """The fields of `struct <struct>` from control.h through cffi's type information:
    the one list of them; CompiledConfig, ProcSlot and Incident are held to it
    (tests/control/test_block_layout.py)."""
    ffi, _ = ext()
    fields = dict(ffi.typeof(f"struct {struct}").fields)
    arrays = [n for n, f in fields.items() if f.type.kind == "array"]
    counted = [n for n in arrays if f"n_{n}" in fields]
    numbers = [n for n, f in fields.items() if f.type.kind == "primitive"
               and not n.endswith("reserved") and n[2:] not in counted]
    return StructFields(tuple(numbers), tuple(counted),
                        tuple(n for n in arrays if n not in counted))


def _text(ffi, chars, errors: str = "replace") -> str:
    return ffi.string(chars).decode(errors=errors)


def _put_range(arr, i: int, bounds: tuple[int, int]) -> None:
    arr[i].lo, arr[i].hi = bounds


def _put_text(arr, i: int, text: str) -> None:
    arr[i] = text.encode()


def _put_number(arr, i: int, value: int) -> None:
    arr[i] = value


# The list fields of struct msp_config: how an entry is written into the array
# (arr, i, value) and read back (ffi, entry). A list added in control.h needs a line here.
_CONFIG_LISTS = {
    "ranges": (_put_range, lambda ffi, e: (e.lo, e.hi)),
    "ids": (_put_text, _text),
    "op_names": (_put_text, _text),
    "devices": (_put_number, lambda ffi, e: e),
}


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
        fields = layout_fields("msp_config")
        for name in fields.numbers:
            setattr(c, name, getattr(cfg, name))
        for name in fields.lists:
            put, _ = _CONFIG_LISTS[name]
            items = getattr(cfg, name)
            setattr(c, f"n_{name}", len(items))
            for i, item in enumerate(items):
                put(getattr(c, name), i, item)
        self.lib.msp_ctl_publish(self._ctl, c)

    def read_config(self) -> tuple[int, CompiledConfig]:
        c = self.ffi.new("struct msp_config *")
        gen = int(self.lib.msp_ctl_read_config(self._ctl, c))
        fields = layout_fields("msp_config")
        values = {name: getattr(c, name) for name in fields.numbers}
        for name in fields.lists:
            _, get = _CONFIG_LISTS[name]
            arr = getattr(c, name)
            values[name] = tuple(get(self.ffi, arr[i]) for i in range(getattr(c, f"n_{name}")))
        return gen, CompiledConfig(**values)

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
                models = tuple(ProcModel(_text(self.ffi, m.name, "surrogateescape"),
                                         int(m.started), int(m.executed),
                                         int(m.next_request), int(m.next_first))
                               for m in p.models[0:min(int(p.n_models), self.lib.MSP_MAX_MODELS)])
                numbers = {f: int(getattr(p, f)) for f in layout_fields("msp_proc").numbers}
                heads = tuple(int(h) for h in
                              p.writer_head[0:min(int(p.n_writers), self.lib.MSP_MAX_WRITERS)])
                out.append(ProcSlot(slot=i, models=models, writer_head=heads, **numbers))
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
        # `ready` is the sequence number once the entry is complete
        numbers = {f: getattr(e, f) for f in layout_fields("msp_incident").numbers
                   if f != "ready"}
        return Incident(seq=seq, **numbers, path=_text(self.ffi, e.path))

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
