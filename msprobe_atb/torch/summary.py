"""What `msprobe-atb run --torch` says at the end, and `msprobe-atb status` of a
torch dump: the torch processes that dumped, from their record logs (a torch dump
has no control block)."""

from __future__ import annotations

from pathlib import Path

from msprobe_atb.control.liveness import is_alive
from msprobe_atb.tree.models import spans
from msprobe_atb.tree.records import LogTailer, ProcKey, list_logs
from msprobe_atb.tree.roundcount import round_counts
from msprobe_atb.units import size_text


def dumped_since(dump_root: Path, since_ns: int) -> list[tuple[ProcKey, list[dict]]]:
    """The record logs begun at or after `since_ns`, with their records."""
    out = []
    for key, path in list_logs(dump_root):
        if key.start_ns >= since_ns:
            tailer, recs = LogTailer(path), []
            while batch := tailer.read_new():
                recs += batch
            out.append((key, recs))
    return out


def render(dump_root: Path, config: str, logs: list[tuple[ProcKey, list[dict]]],
           final: bool = True) -> str:
    """The summary; its last line, the count of tensors written, only if `final`
    (every process that dumped has exited)."""
    lines = [f"dump root:   {dump_root}", f"config file: {config}",
             f"processes:   {len(logs)} dumped a torch model"]
    written = 0
    for key, recs in logs:
        attach = next((r for r in recs if r.get("k") == "attach"), {})
        exit_ = next((r for r in recs if r.get("k") == "exit"), None)
        rounds = [int(r["round"].rpartition("/")[2]) for r in recs if r.get("k") == "round"]
        tensors = [r for r in recs if r.get("k") == "tensor"]
        ok = [r for r in tensors if r.get("file") != "lost"]
        written += len(ok)
        size = sum(r.get("size", 0) for r in ok if r.get("file") == "bin")
        state = "exited" if exit_ else "running" if is_alive(key.pid, key.start_ns) else \
            "ended without its exit record (killed?)"
        lines.append(f"  pid {key.pid}: {attach.get('model', '?')} (torch "
                     f"{attach.get('torch', '?')}), {state}; rounds "
                     f"{spans(rounds) if rounds else 'none'} dumped, tensors {len(ok)}/"
                     f"{len(tensors)} written ({size_text(size)}), errors "
                     f"{len(tensors) - len(ok)}, non-tensor values skipped "
                     f"{exit_.get('skipped', 0) if exit_ else '?'}")
    total, complete, _ = round_counts(dump_root)
    lines.append(f"rounds:      {total} execution-round directories, {complete} marked "
                 "complete (ROUND_COMPLETE.json)")
    if final:
        lines.append(f"{dump_root}: {written} selected tensors written by {len(logs)} "
                     "process(es)")
    return "\n".join(lines)


def config_of(logs: list[tuple[ProcKey, list[dict]]]) -> str:
    """The config file the processes attached with, from their attach records."""
    return next((r["config"] for _, recs in logs for r in recs
                 if r.get("k") == "attach" and r.get("config")), "?")


def all_exited(logs: list[tuple[ProcKey, list[dict]]]) -> bool:
    return all(any(r.get("k") == "exit" for r in recs) for _, recs in logs)
