"""A process's info/overflow/{dev}_{pid}.csv: its overflow events in order,
each with who found it (contracts §5.1), from its `overflow` and
`overflow_output` records. The file is rewritten whole and its rows are held
in memory."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from msprobe_atb.tree.csvfmt import csv_line, parse_tensor_path
from msprobe_atb.tree.overflow_findings import ATB, ATB_BF16_FINITE, of_report, sentence
from msprobe_atb.tree.records import iso_time, record_int

log = logging.getLogger("msprobe_atb")

HEADER = "Sequence,Time,Device and PID,Op Id,Kernel Name,Report,Finding"
# The events a file lists: with overflow_nums -1 a long service reports without
# end. Later ones are counted (the control block's overflow_events, in `status`)
# and the cut is logged.
MAX_ROWS = 10_000


def _kernel_of(path: str) -> tuple[str, str]:
    """ATB's "<OpType>_<ids>" and kernel name of the kernel dir of an output
    path ("{dev}_{pid}/{exec}/2_Prefill_layer/11_ActivationOperation/
    0_SwiGluKernel/after/outtensor0.bin": ActivationOperation_2_11, SwiGluKernel)."""
    tp = parse_tensor_path(path)
    if tp is None or not tp.names:
        return "", ""
    if len(tp.names) < 2:
        return f"{tp.names[0]}_{tp.ids[0]}", ""
    return "_".join((tp.names[-2], *tp.ids[:-1])), tp.names[-1]


@dataclass
class Event:
    dev: int
    cells: list[str]  # Sequence, Time, Op Id, Kernel Name, Report
    finding: str  # a code of overflow_findings
    outputs: list[tuple[str, bool]] = field(default_factory=list)  # ATB's report: its kernel's


@dataclass
class OverflowLog:
    pid: int
    events: list[Event] = field(default_factory=list)
    by_seq: dict[int, Event] = field(default_factory=dict)
    cut: bool = False  # more than MAX_ROWS came

    def add_event(self, rec: dict) -> bool:
        """An `overflow` record; False if it is past the cut."""
        if len(self.events) >= MAX_ROWS:
            if not self.cut:
                self.cut = True
                log.warning("process %s: more than %d overflow events; its info/overflow CSV "
                            "lists the first %d, `status` counts them all (overflow_events)",
                            self.pid, MAX_ROWS, MAX_ROWS)
            return False
        kernel = str(rec.get("kernel", ""))
        finding = rec.get("finding")
        if isinstance(finding, str) and finding:  # the probe's own: no report of ATB's
            op_id, name = _kernel_of(str(rec.get("path", "")))
            report = ""
        else:
            finding = ATB
            op_id, sep, name = kernel.partition(":")
            op_id, name, report = (op_id, name, kernel) if sep else ("", kernel, kernel)
        t = record_int(rec.get("t"), 0)
        seq = record_int(rec.get("seq"), 0)
        ev = Event(record_int(rec.get("dev")), [str(seq), iso_time(t) if t else "", op_id, name,
                                                report], finding)
        self.events.append(ev)
        self.by_seq[seq] = ev
        return True

    def add_output(self, rec: dict) -> bool:
        """An `overflow_output` record: an output of the kernel of ATB's report,
        in its real dtype. True if the event's finding changed."""
        ev = self.by_seq.get(record_int(rec.get("event"), -1))
        if ev is None or ev.finding not in (ATB, ATB_BF16_FINITE):
            return False
        ev.outputs.append((str(rec.get("dtype", "")), rec.get("nonfinite") is not False))
        old, ev.finding = ev.finding, of_report(ev.outputs)
        return old != ev.finding

    def first_device(self) -> int:
        return next((e.dev for e in self.events if e.dev >= 0), -1)

    def text(self, dev_pid: str) -> bytes:
        body = "".join(csv_line(e.cells[:2] + [dev_pid] + e.cells[2:] + [sentence(e.finding)])
                       for e in self.events)
        return (HEADER + "\n" + body).encode("utf-8", "surrogateescape")
