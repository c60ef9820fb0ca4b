"""`Dumper`: forward hooks on a torch model that write the tree the shim writes.

    with Dumper(model, output="out", config="config.json"):
        model.generate(...)

Rounds: round r is the top module's forward call r from the start of the dump
(`generate`: the prefill is round 0, decode step k round k+1), its directory
`data/{dev}_{pid}/{r}`. exec_range counts these calls.

Ops: the top module, and its Hugging Face base model (`model.base_model`, e.g.
LlamaModel inside LlamaForCausalLM), are the model, not ops. The modules they call
are the top-level ops, `{i}_{Class}` numbered 0, 1, ... in call order within the
round (embed_tokens, rotary_emb, layers.0, ..., norm, lm_head); the modules an op
calls are its children, numbered the same way below it (`2_LlamaDecoderLayer/
3_LlamaMLP/1_SiLUActivation`). The qualified module name of each op
(`model.layers.0.mlp.act_fn`) is in info/: the `module` key of its node in
info/model and in `param` of its nodes in info/layer.

Inputs are written to `before/intensor{i}`, outputs to `after/outtensor{i}`
(torch/tensors.py has the order and names). The device id is the index of the
model's first parameter's device; 0 on the CPU.

Every file is written before its record; at the end the records are built into
statistic.csv, info/, ROUND_COMPLETE.json and the manifest by the same builder as
the shim's (`msprobe-atb rebuild`). An error while writing a tensor is recorded as
`lost` and counted, never raised into the model.

Threads: each thread's forward calls of the top module are rounds of their own,
numbered in the order they begin; one lock keeps the hooks of different threads
apart (the files and records are written one tensor at a time anyway). A module
called on another thread than its round's is in no round. A process forked while
the dump runs dumps as a process of its own (torch/forkhook.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from msprobe_atb.config import Config
from msprobe_atb.offline.read.binwrite import bin_header
from msprobe_atb.tree import fsio

from . import forkhook, tensors
from .build import build_tree
from .dataflow import ModelNames, Pool, Slot
from .recordlog import RecordLog
from .selection import device_selected, ignored_keys, op_selected, round_selected, torch_config

FRAMEWORK = "torch"


def _say(text: str) -> None:
    print(f"[msprobe-atb] {text}", file=sys.stderr, flush=True)


@dataclass
class _Frame:
    module: Any
    segs: tuple[str, ...]  # op path below the round dir; () for the model itself
    counter: list[int]  # next child id (shared by the model's wrappers: one top level)
    parent: _Frame | None = None
    selected: bool = False
    node: dict | None = None  # this op's node of the info graph
    pool: Pool | None = None  # its tensors, numbered as ATB numbers a graph's
    in_slots: list[Slot] = field(default_factory=list)  # its inputs in its parent's pool
    model_ins: list[str] = field(default_factory=list)  # top-level: its inputs' model names
    # open directories while the op runs (closed when it ends): its own, and its stages
    fd: int | None = None
    stages: dict[str, int] = field(default_factory=dict)

    def close(self) -> None:
        for fd in (*self.stages.values(), *([self.fd] if self.fd is not None else [])):
            os.close(fd)
        self.stages.clear()
        self.fd = None


@dataclass
class _Round:
    """A forward call of the top module in progress, on one thread."""

    number: int
    dumping: bool
    stack: list[_Frame]  # the model, then the ops under way, innermost last
    names: ModelNames | None  # the model-level names of its tensors (when dumping)
    # its top-level ops: node, model names of its ins and outs
    topo: list[tuple[dict, list[str], list[str]]] = field(default_factory=list)
    fd: int | None = None  # its directory, once something is in it

    def close(self) -> None:
        for frame in self.stack:
            frame.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@dataclass
class _Counts:
    ops_seen: int = 0
    tensors_selected: int = 0
    tensors_written: int = 0
    bytes_written: int = 0
    errors: int = 0
    skipped: int = 0  # arguments and outputs that are no tensor, or of a dtype with no code
    rounds: list[int] = field(default_factory=list)


def _device_of(model) -> int:
    param = next(iter(model.parameters()), None)
    if param is None or param.device.type == "cpu":
        return 0
    return param.device.index or 0


class Dumper:
    """Dumps `model`'s modules into `<output>/atb_dump_data` as `config` selects.
    `config`: a config file path (JSON or YAML, as `msprobe-atb check` reads it) or a
    dict of its keys; a bad one raises ConfigError naming every problem."""

    def __init__(self, model, output: str | os.PathLike, config):
        self.cfg: Config = torch_config(config)
        self.model = model
        self.output = os.path.abspath(output)
        self.dump_root = Path(self.output) / "atb_dump_data"
        self.config_path = "" if isinstance(config, dict) else os.path.abspath(config)
        base = getattr(model, "base_model", None)
        self._wrappers = {id(model)} | ({id(base)} if isinstance(base, torch.nn.Module) else set())
        self._names = {id(m): n for n, m in model.named_modules()}
        self.device = _device_of(model)
        self._handles: list = []
        self._log: RecordLog | None = None
        self._reset()

    def _reset(self) -> None:
        """The state of one process's dump: at the start, and anew in a forked child."""
        self.counts = _Counts()
        self._lock = threading.Lock()  # the hooks of one thread at a time
        self._rounds: dict[int, _Round] = {}  # thread id -> its round under way
        self._seq = 0
        self._calls = 0
        self._graphs: dict[str, str] = {}  # info/layer graphs reported: name -> JSON
        self._topo_reported = False

    # ---- start and end ----
    def __enter__(self) -> Dumper:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Registers the hooks; with `dump_enable: false` nothing at all (no file)."""
        if not self.cfg.dump_enable:
            return
        self._attach()
        for key in ignored_keys(self.cfg):
            _say(f'"{key}" is ignored by the torch dumper (every tensor is written in full, '
                 "synchronously)")
        for module in self.model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post, with_kwargs=True,
                                                              always_call=True))
        forkhook.track(self)
        _say(f"Ready to dump {type(self.model).__name__} (torch), task {self.cfg.task}, "
             f"exec_range {self.cfg.exec_range}, into {self.dump_root} "
             f"(pid {self.pid}, device {self.device})")

    def _attach(self) -> None:
        """This process's record log and its attach record."""
        self.pid = os.getpid()
        self.start_ns = time.time_ns()
        self.dev_pid = f"{self.device}_{self.pid}"
        mine = self.dump_root / "data" / self.dev_pid
        if mine.exists():
            raise FileExistsError(f"{mine}: this process (pid {self.pid}) has dumped into "
                                  f"{self.output} already; give another output directory (a "
                                  "second dump would mix its rounds with the first one's)")
        os.makedirs(self.dump_root, mode=0o750, exist_ok=True)
        self._log = RecordLog(self.dump_root, self.pid, self.start_ns)
        self._log.write("attach", pid=self.pid, start_ns=self.start_ns, abi=-1, host_abi=-1,
                        output=self.output, config=self.config_path, exe=sys.executable,
                        framework=FRAMEWORK, model=type(self.model).__name__,
                        torch=torch.__version__)

    def forked(self) -> bool:
        """In a forked child (torch/forkhook.py): the child's own dump begins, the
        rounds under way at the fork are the parent's. False if it cannot (said:
        the child runs on undumped)."""
        if self._log is None:  # closed meanwhile, by another thread
            return False
        parent = self.pid
        for rnd in self._rounds.values():
            rnd.close()
        self._log.close()  # the child's copy of the parent's log
        self._log = None
        self._reset()
        try:
            self._attach()
        except Exception as exc:  # an unwritable output, a reused pid's directory
            self._unhook()
            _say(f"pid {os.getpid()}, forked from pid {parent}, is not dumped: "
                 f"{type(exc).__name__}: {exc}")
            return False
        _say(f"pid {self.pid}, forked from pid {parent}, is dumped as a process of its own")
        return True

    def _unhook(self) -> None:
        forkhook.untrack(self)
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def close(self) -> None:
        """Removes the hooks, writes the exit record and builds the derived files."""
        with self._lock:  # a hook of another thread under way ends first
            if self._log is None:
                return
            self._unhook()
            c = self.counts
            self._log.write("exit", drained=True, lost=0, ops_seen=c.ops_seen,
                            tensors_selected=c.tensors_selected,
                            tensors_written=c.tensors_written, bytes_written=c.bytes_written,
                            drops=0, errors=c.errors, overflow_events=0, unrecorded={},
                            skipped=c.skipped)
            self._log.close()
            self._log = None
        self._build()

    def _build(self) -> None:
        try:
            problem = build_tree(self.dump_root)
        except Exception as exc:  # the tensors and records are on disk: `rebuild` can redo it
            problem = (f"derived files NOT built ({type(exc).__name__}: {exc}); "
                       f"`msprobe-atb rebuild {self.output}` builds them")
        c = self.counts
        _say(f"torch dump: {c.tensors_written} of {c.tensors_selected} selected tensors "
             f"written in {len(c.rounds)} rounds ({c.errors} errors) into {self.dump_root}"
             + (f"; {problem}" if problem else ""))

    # ---- the hooks ----
    def _pre(self, module, args, kwargs) -> None:
        with self._lock:
            try:
                rnd = self._rounds.get(threading.get_ident())
                if rnd is None:
                    if module is self.model and self._log is not None:
                        self._begin_round(args, kwargs)
                    return
                if not rnd.dumping:
                    return
                parent = rnd.stack[-1]
                if not parent.segs and id(module) in self._wrappers:
                    rnd.stack.append(_Frame(module, (), parent.counter, parent))
                    return
                self._begin_op(rnd, module, parent, args, kwargs)
            except Exception as exc:  # never into the model
                self._failed("a forward pre-hook", exc)

    def _post(self, module, args, kwargs, output) -> None:
        with self._lock:
            try:
                self._after(module, output)
            except Exception as exc:
                self._failed("a forward hook", exc)

    def _after(self, module, output) -> None:
        thread = threading.get_ident()
        rnd = self._rounds.get(thread)
        if rnd is None or not (rnd.dumping or module is self.model):
            return
        stack = rnd.stack
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].module is module), None)
        if at is None:
            return  # a call the pre-hook did not see
        while len(stack) > at + 1:  # calls whose forward hook never came
            stack.pop().close()
        frame = stack[-1]
        try:
            if len(stack) == 1:
                self._end_round(rnd)
            elif frame.segs:
                self._end_op(rnd, frame, output)
        finally:
            stack.pop().close()
            if not stack:
                del self._rounds[thread]
                rnd.close()

    def _failed(self, where: str, exc: Exception) -> None:
        self.counts.errors += 1
        if self.counts.errors <= 3:
            _say(f"{where} failed ({type(exc).__name__}: {exc}); the model runs on"
                 + (" (further errors are only counted)" if self.counts.errors == 3 else ""))

    # ---- rounds and ops ----
    def _begin_round(self, args, kwargs) -> None:
        number = self._calls
        self._calls += 1
        dumping = round_selected(self.cfg, number) and device_selected(self.cfg, self.device)
        names = ModelNames(type(self.model).__name__,
                           [t for _, t in tensors.flatten(args, kwargs)[0]]) if dumping else None
        self._rounds[threading.get_ident()] = _Round(number, dumping,
                                                     [_Frame(self.model, (), [0])], names)

    def _end_round(self, rnd: _Round) -> None:
        if not rnd.dumping:
            return
        self.counts.rounds.append(rnd.number)
        if rnd.topo and not self._topo_reported:
            self._report_topo(rnd.topo)
        self._log.write("round", round=f"{self.dev_pid}/{rnd.number}")

    def _begin_op(self, rnd: _Round, module, parent: _Frame, args, kwargs) -> None:
        op_id = parent.counter[0]
        parent.counter[0] += 1
        name = type(module).__name__
        segs = (*parent.segs, f"{op_id}_{name}")
        ids = "_".join(s.partition("_")[0] for s in segs)
        node = {"opName": f"{name}_{ids}", "opType": name,
                "param": {"module": self._names.get(id(module), "")}, "nodes": []}
        found, skipped = tensors.flatten(args, kwargs)
        node["inTensorNum"] = len(found)
        found_tensors = [t for _, t in found]
        frame = _Frame(module, segs, [0], parent, op_selected(self.cfg, segs), node,
                       Pool(found_tensors))
        if parent.node is not None:
            parent.node["nodes"].append(node)
            frame.in_slots = parent.pool.slots(found_tensors)
        else:
            frame.model_ins = rnd.names.names(found_tensors)
        rnd.stack.append(frame)
        self.counts.ops_seen += 1
        if frame.selected:
            self.counts.skipped += skipped
            self._write_all(rnd, frame, "before", "intensor", found)

    def _end_op(self, rnd: _Round, frame: _Frame, output) -> None:
        found, skipped = tensors.flatten((output,))
        frame.node["outTensorNum"] = len(found)
        found_tensors = [t for _, t in found]
        frame.pool.finish(found_tensors, frame.node)
        parent = frame.parent
        if parent.pool is not None:
            parent.pool.children.append((frame.node, frame.in_slots,
                                         parent.pool.slots(found_tensors)))
        else:
            rnd.topo.append((frame.node, frame.model_ins, rnd.names.names(found_tensors)))
        if frame.selected:
            self.counts.skipped += skipped
            self._write_all(rnd, frame, "after", "outtensor", found)
        if len(frame.segs) == 1:
            self._report_graph(frame.node)

    # ---- tensors ----
    def _write_all(self, rnd: _Round, frame: _Frame, stage: str, kind: str, found) -> None:
        for i, (name, t) in enumerate(found):
            code = tensors.CODES.get(t.dtype)
            if code is None:
                self.counts.skipped += 1
                continue
            self._write_one(rnd, frame, stage, tensors.file_name(kind, i, name), t, code)

    def _dir(self, rnd: _Round, frame: _Frame) -> int:
        """The op's directory (the round's for the model), made and opened once."""
        if not frame.segs:
            if rnd.fd is None:
                rnd.fd = fsio.open_dir(self.dump_root, ("data", self.dev_pid, str(rnd.number)),
                                       True)
            return rnd.fd
        if frame.fd is None:
            frame.fd = fsio.open_subdir(self._dir(rnd, frame.parent), frame.segs[-1])
        return frame.fd

    def _stage_dir(self, rnd: _Round, frame: _Frame, stage: str) -> int:
        if stage not in frame.stages:
            frame.stages[stage] = fsio.open_subdir(self._dir(rnd, frame), stage)
        return frame.stages[stage]

    def _write_one(self, rnd: _Round, frame: _Frame, stage: str, fname: str, t: torch.Tensor,
                   code: int) -> None:
        rel = (self.dev_pid, str(rnd.number), *frame.segs, stage, fname)
        self.counts.tensors_selected += 1
        seq = self._seq
        self._seq += 1
        task = self.cfg.task
        rec: dict[str, Any] = {"seq": seq, "path": "/".join(rel), "format": 2, "dtype": code,
                               "dims": ",".join(map(str, t.shape)),
                               "size": t.numel() * t.element_size(), "task": task}
        try:
            tensors.check_expansion(t)
            t = tensors.host(t)
            # every task: the manifest has them (statistic.csv shows them per task)
            st, note = tensors.stats(t)
            if task == "statistics":
                rec["file"] = "none"
            else:
                data = tensors.payload(t)
                header = bin_header(len(data), code, t.shape)
                fsio.write_streamed_at(self._stage_dir(rnd, frame, stage), fname,
                                       lambda f: (f.write(header), f.write(data)))
                rec["file"] = "bin"
                self.counts.bytes_written += len(header) + len(data)
            rec["stats"] = st
            if note:
                rec["note"] = note
            self.counts.tensors_written += 1
        except Exception as exc:  # a full disk, an unusable name: this tensor is lost
            self.counts.errors += 1
            rec.update(file="lost", stats=None, note=f"{type(exc).__name__}: {exc}")
            if self.counts.errors <= 3:
                _say(f"cannot write {rec['path']}: {exc}")
        self._log.write("tensor", **rec)

    # ---- info/ ----
    def _report_graph(self, node: dict) -> None:
        text = json.dumps(node, separators=(",", ":"))
        if self._graphs.get(node["opName"]) != text:
            self._graphs[node["opName"]] = text
            self._log.write("graph", name=node["opName"], dev=self.device, json=text)

    def _report_topo(self, top: list[tuple[dict, list[str], list[str]]]) -> None:
        self._topo_reported = True
        model = type(self.model).__name__
        topo = {"modelName": model, "framework": FRAMEWORK,
                "nodes": [{"opName": n["opType"], "module": n["param"]["module"],
                           "inTensors": ins, "outTensors": outs} for n, ins, outs in top]}
        self._log.write("topo", model=model, dev=self.device,
                        json=json.dumps(topo, separators=(",", ":")))
