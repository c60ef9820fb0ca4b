"""Subcommands convert, stats, compare, diagnose, overflow, report (registered into
`msprobe-atb`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import datetime
from pathlib import Path

from ..argtypes import seconds
from .compare.engine_rule import CONNECT_TIMEOUT_S
from .read.formulas import FORMULAS
from .read.jsonsafe import jsonable
from .read.layout import DumpNotFound
from .read.progress import progress_bar


def _err(cmd: str, msg: str) -> int:
    print(f"msprobe-atb {cmd}: error: {msg}", file=sys.stderr)
    return 2


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", help="op id (5_1, with its children) or part of the op name path")
    p.add_argument("--layer", help="top-level op: its id, its name, or a trailing number")
    p.add_argument("--round", help="rounds, e.g. 0 or 0,2-4")
    p.add_argument("--device", help="devices, e.g. 0 or 0-3")


def _open(path: str, fill_stats: bool):
    from .read.table import open_dump
    return open_dump(path, fill_stats=fill_stats)


def cmd_stats(a) -> int:
    if len(a.dirs) > 1:
        return _stats_ranks(a)
    from .read.table import filter_tensors, verify_files
    from .stats.summary import format_text, summarize
    try:
        dump = _open(a.dirs[0], fill_stats=not a.no_files)
        bad_files = verify_files(dump) if a.verify else 0
        df = filter_tensors(dump.tensors, op=a.op, layer=a.layer, round=a.round,
                            device=a.device)
    except (DumpNotFound, ValueError) as e:
        return _err("stats", str(e))
    s = summarize(dump, df)
    if a.verify:
        s["verify_bad_files"] = bad_files
    if a.csv:
        df.drop("key", "seq_exact").write_csv(a.csv)
    if a.json:
        print(json.dumps(jsonable(s), indent=1))
    else:
        print(format_text(s))
        if a.verify:
            print(f"verify: {bad_files} bad file(s), listed as problems above" if bad_files
                  else "verify: every file's header, size and alias target is sound")
        if a.csv:
            print(f"Tensor table ({df.height} rows): {a.csv}")
    return 1 if bad_files else 0


def _stats_ranks(a) -> int:
    """Several dumps (one per node): ranks side by side (offline/stats/ranks.py)."""
    from .read.table import verify_files
    from .stats.ranks import format_ranks, stats_ranks
    if a.csv:
        return _err("stats", "--csv takes one dump; give one DIR")
    try:
        opened = [_open(d, fill_stats=not a.no_files) for d in a.dirs]
        bad_files = sum(verify_files(d) for d in opened) if a.verify else 0
        s = stats_ranks(a.dirs, opened, op=a.op, layer=a.layer, round=a.round,
                        device=a.device)
    except (DumpNotFound, ValueError) as e:
        return _err("stats", str(e))
    if a.json:
        print(json.dumps(jsonable(s), indent=1))
    else:
        print(format_ranks(s, s["dumps"]))
        for prob in s["problems"][:20]:
            print(f"  problem: {prob}")
    return 1 if bad_files else 0


XLSX_AUTO_ROWS = 100_000  # beyond this, a result dir gets the CSV only (xlsx is slow)


def _compare_outputs(out: Path, res, summary: str) -> tuple[list[str], list[str]]:
    """Write the result rows: `NAME.csv`, `NAME.xlsx`, or into a directory the
    CSV and (up to XLSX_AUTO_ROWS rows) the workbook, named like msProbe's
    `atb_{tensor|stats}_compare_result_<time>`. Returns (files, notes)."""
    from .compare.xlsx import write_workbook
    notes: list[str] = []
    if out.suffix in (".csv", ".xlsx"):
        targets = [out]
    else:
        mode = "tensor" if "tensor" in res.rows.get_column("mode").unique().to_list() else "stats"
        stem = f"atb_{mode}_compare_result_{datetime.now().strftime('%Y%m%d%H%M%S')}"
        targets = [out / f"{stem}.csv", out / f"{stem}.xlsx"]
        if res.rows.height > XLSX_AUTO_ROWS:
            targets.pop()
            notes.append(f"no workbook for {res.rows.height} rows (more than "
                         f"{XLSX_AUTO_ROWS}); -o NAME.xlsx writes one")
    for f in targets:
        f.parent.mkdir(parents=True, exist_ok=True)
        if f.suffix == ".csv":
            res.rows.write_csv(f)
        else:
            bar = progress_bar("workbook", unit="row", total=res.rows.height)
            try:
                write_workbook(f, res.rows, summary, progress=bar.update)
            finally:
                bar.close()
    return [str(f) for f in targets], notes


def cmd_compare(a) -> int:
    from .compare.dask_connect import ClusterError
    from .read.dumpset import open_dumps
    if a.mode != "atb":
        return _err("compare", f"-m {a.mode}: only mode atb (ATB dumps) is supported")
    if a.scheduler and a.engine != "auto":
        return _err("compare", f"--engine {a.engine} with --scheduler: the pairs run on the "
                               "cluster at --scheduler; drop one of the two")
    if a.scheduler is not None:
        from .compare.dask_connect import scheduler_address
        try:
            scheduler_address(a.scheduler)  # a typo is said before the dumps are read
        except ClusterError as e:
            return _err("compare", str(e))
    try:
        golden, target = open_dumps(a.golden_path), open_dumps(a.target_path)
    except (DumpNotFound, ValueError) as e:
        return _err("compare", str(e))
    with contextlib.ExitStack() as stack:
        try:
            compare = _golden_compare(golden, target, a, stack)
        except ValueError as e:
            return _err("compare", str(e))
        bar = progress_bar("compare", unit="pair")
        try:
            res = compare(golden, target, rtol=a.rtol, atol=a.atol, min_within=a.min_within,
                          min_cosine=a.min_cosine, jobs=a.jobs, progress=bar.update,
                          scheduler=a.scheduler, pair_by_id=a.pair_by_id,
                          min_matched=a.min_matched, engine=a.engine,
                          connect_timeout=a.connect_timeout,
                          total=lambda n: setattr(bar, "total", n))
        except ClusterError as e:
            return _err("compare", str(e))
        except OSError as e:  # --write-mapping's file
            return _err("compare", str(e))
        finally:
            bar.close()
        return _compare_report(a, res)


def _golden_compare(golden, target, a, stack: contextlib.ExitStack):
    """compare_dumps, or for a golden dumped from torch the aligned compare
    (compare/torch_golden.py), whose golden files live until `stack` closes."""
    from .compare.dumps import compare_dumps
    from .read.torch_dump import is_torch_dump
    mapping_file, write_to = getattr(a, "mapping", None), getattr(a, "write_mapping", None)
    both_torch = is_torch_dump(golden) and is_torch_dump(target)
    if not is_torch_dump(golden) or both_torch:  # two torch dumps share one structure
        if mapping_file or write_to:
            raise ValueError("--mapping and --write-mapping align a golden dumped from "
                             "torch with an ATB dump; "
                             + ("both dumps are torch's" if both_torch else
                                f"{golden.layout.given} is not one (its info/model does "
                                "not say framework torch)"))
        return compare_dumps
    from .compare.torch_golden import torch_compare
    from .compare.torch_mapping import read_mapping
    mapping = read_mapping(mapping_file) if mapping_file else None

    def compare(g, t, **kw):
        return stack.enter_context(torch_compare(
            g, t, mapping=mapping, write_mapping=Path(write_to) if write_to else None, **kw))
    return compare


def _against_golden(golden, target, a, stack: contextlib.ExitStack):
    """`target` compared with `golden` (_golden_compare's compare) on `a.jobs` workers,
    with a progress bar; ValueError for options that do not apply to these dumps."""
    compare = _golden_compare(golden, target, a, stack)
    bar = progress_bar("compare with golden")
    try:
        return compare(golden, target, jobs=a.jobs, progress=bar.update)
    finally:
        bar.close()


def _compare_report(a, res) -> int:
    from .compare.headline import format_summary, summary_json
    try:
        files, notes = _compare_outputs(Path(a.output), res, format_summary(res))
    except OSError as e:
        return _err("compare", f"cannot write the result to {a.output}: {e}")
    if a.json:
        print(json.dumps(jsonable(summary_json(res, files, notes)), indent=1))
    else:
        print(format_summary(res, files))
        for n in notes:
            print(f"  note: {n}")
    # 3: checked nothing or too little, or different structure; 1: a tensor diverges,
    # could not be read or was not compared (an unanswered comparison is not a pass).
    return res.exit_code()


DIAGNOSE_EXITS = """exit codes:
  0  no cause found: no NaN/Inf, no divergence from the golden (a jump that
     replay finds no op at fault behind is no finding)
  1  a root cause is named
  2  bad arguments, or a dump that cannot be read
  3  something is wrong (NaN/Inf, or a divergence) but no op or input behind it
     replays at fault, or the comparison with the golden is incomplete (built
     differently, or too little compared: said)"""


def cmd_diagnose(a) -> int:
    from .diagnose.engine import diagnose
    from .diagnose.text import diagnosis_json
    from .read.dumpset import open_dumps
    try:
        dump = _open(a.dir, fill_stats=True)
        golden = open_dumps([a.golden]) if a.golden else None
    except (DumpNotFound, ValueError) as e:
        return _err("diagnose", str(e))
    refused: list[str] = []
    with contextlib.ExitStack() as stack:
        if golden is None:
            doc = diagnosis_json(diagnose(dump))
        else:
            try:
                res = _against_golden(golden, dump, a, stack)
            except ValueError as e:
                return _err("diagnose", str(e))
            sc = res.scope
            refused = (sc.structure or sc.causes or ["too little was compared"]) \
                if sc.incomplete else []
            doc = res.diagnosis
    if refused:
        doc = {**doc, "golden_incomplete": refused}
    if a.json:
        print(json.dumps(jsonable(doc), indent=1))
    else:
        print("\n".join(doc["lines"]))
        for why in refused:
            print(f"  the comparison with the golden is incomplete: {why}")
    if doc["found"]:
        return 1
    return 3 if refused or doc["unexplained"] else 0


def cmd_convert(a) -> int:
    from .read.convert import convert
    bar = progress_bar("convert")
    try:
        rep = convert(a.src, a.output, jobs=a.jobs, raw=a.raw, progress=bar.update,
                      total=lambda n: setattr(bar, "total", n))
    except FileNotFoundError as e:
        return _err("convert", str(e))
    finally:
        bar.close()
    print(f"converted {rep.converted}, up to date {rep.up_to_date}, "
          f"not saved (kernel stubs) {rep.not_saved}, errors {len(rep.errors)} -> {a.output}")
    for e in rep.errors[:50]:
        print(f"  error: {e}", file=sys.stderr)
    return 1 if rep.errors else 0


def cmd_overflow(a) -> int:
    from .stats.overflow import format_events, overflow_events
    try:
        dump = _open(a.dir, fill_stats=True)
    except DumpNotFound as e:
        return _err("overflow", str(e))
    ev = overflow_events(dump, all_ops=a.all)
    if a.json:
        print(json.dumps(jsonable(ev), indent=1))
    else:
        print(format_events(ev, a.limit))
        for p in dump.problems[:20]:
            print(f"  problem: {p}")
    return 0


def cmd_report(a) -> int:
    from .compare.dumps import EXIT_INCOMPLETE
    from .report.page import REPORT_STEPS, build_report
    try:
        dump = _open(a.dir, fill_stats=True)
        golden = _open(a.golden, False) if a.golden else None
    except DumpNotFound as e:
        return _err("report", str(e))
    with contextlib.ExitStack() as stack:
        comp = None
        if golden is not None:
            comp = _against_golden(golden, dump, a, stack)
        if comp is not None and comp.torch_alignment is not None:
            golden = comp.torch_alignment.golden  # the torch tensors, aligned
        bar = progress_bar("report", unit="step", total=REPORT_STEPS)
        try:
            doc, info = build_report(dump, comp, a.golden, golden=golden,
                                     progress=lambda: bar.update(1))
        finally:
            bar.close()
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(doc, encoding="utf-8")
    if a.json:
        print(json.dumps(jsonable({"report": str(out.resolve()), **info}), indent=1))
    else:
        print(f"report: {out} ({info['plots']} plots; open it in a browser, it works offline)")
    if info["refused"]:
        print("report: the golden dump was not compared (the page says why): "
              + "; ".join(info["refused"]), file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


def _jobs(p: argparse.ArgumentParser) -> None:
    from .read.cores import default_jobs
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(), metavar="N",
                   help=f"worker processes reading tensors (default: {default_jobs()}, "
                        "one per core this process may run on)")


def register(sub) -> None:
    p = sub.add_parser("stats", help="summary of a dump: rounds, ops, first NaN/Inf, "
                                     "largest values per layer")
    p.add_argument("dirs", nargs="+", metavar="DIR",
                   help="output root, atb_dump_data, data/, {dev}_{pid} or round dir; several "
                   "(one per node): which rank went NaN/Inf first per round, and per rank")
    _filters(p)
    p.add_argument("--csv", metavar="FILE", help="also write the (filtered) tensor table")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--verify", action="store_true",
                   help="check every file's header, size and alias target (reads no data); "
                        "exit 1 if any is bad")
    p.add_argument("--no-files", action="store_true",
                   help="do not read .bin files for tensors without statistics")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("compare", help="compare a target dump with a golden one (exit 1 if "
                                       "any tensor diverges or cannot be read, or a dump lost "
                                       "selected tensors; 3 if too little "
                                       "could be compared or the dumps differ in structure)",
                       epilog=FORMULAS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--mode", default="atb", help="atb (msProbe's spelling; the default)")
    p.add_argument("-gp", "--golden_path", "--golden-path", dest="golden_path", required=True,
                   nargs="+", metavar="DIR",
                   help="golden dump or round dir (several: one dump per node)")
    p.add_argument("-tp", "--target_path", "--target-path", "-mp", "--my-path", "--my_path",
                   dest="target_path", required=True, nargs="+", metavar="DIR",
                   help="target dump or round dir (msit: -mp/--my-path; several: one dump "
                        "per node)")
    p.add_argument("-o", "--output", "--output_path", "--output-path", dest="output",
                   metavar="PATH",
                   default="./output",
                   help="NAME.csv, NAME.xlsx (Excel workbook), or a directory that gets "
                        "atb_{tensor|stats}_compare_result_<time>.csv and .xlsx (./output)")
    p.add_argument("--pair-by-id", action="store_true",
                   help="pair tensors at the same op ids even where the op names differ")
    p.add_argument("--json", action="store_true",
                   help="print the summary (counts, coverage, structure, first divergent "
                        "tensor, error growth, result files, exit code) as JSON")
    p.add_argument("--min-matched", type=float, default=0.5,
                   help="share of the smaller dump's tensors that must be compared, else "
                        "exit 3 (0.5)")
    p.add_argument("--mapping", metavar="FILE",
                   help="golden dumped from torch: a mapping file (YAML) saying which torch "
                        "tensors each ATB tensor is compared with, where the structural "
                        "alignment does not fit (docs/torch_golden.md)")
    p.add_argument("--write-mapping", metavar="FILE",
                   help="golden dumped from torch: write the alignment used, as a mapping "
                        "file to edit and give to --mapping")
    p.add_argument("--rtol", type=float, help="override the target dtype's rtol")
    p.add_argument("--atol", type=float, help="override the target dtype's atol")
    p.add_argument("--min-within", type=float, default=0.95,
                   help="share of elements within tolerance to pass (0.95)")
    p.add_argument("--min-cosine", type=float, default=0.999, help="cosine to pass (0.999)")
    _jobs(p)
    from .compare.engine_rule import ENGINES, LOCAL_CLUSTER_MIN_S
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="where the tensor pairs are compared: a local Dask cluster of -j "
                        "worker processes, or this process; auto (the default) starts the "
                        "cluster when the pairs would take over "
                        f"{LOCAL_CLUSTER_MIN_S:g} s in-process, and works on them here "
                        "while it starts")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the per-pair work on this existing Dask cluster; workers "
                        "announce their dump roots with `dask worker --preload "
                        "msprobe_atb.offline.dask_roots --dump-root DIR`")
    p.add_argument("--connect-timeout", type=seconds, default=CONNECT_TIMEOUT_S, metavar="S",
                   help="with --scheduler: how long the scheduler has to answer "
                        f"({CONNECT_TIMEOUT_S:g})")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("diagnose", help="the root cause of NaN/Inf, jumps or a divergence: "
                       "the first op whose own result is wrong, an input already bad, or an "
                       "overflow (exit 1 if a cause is named)",
                       description="Finds where the dump first goes wrong (NaN/Inf, a tensor "
                       "whose abs-max or norm jumps against its other rounds or its "
                       "neighbours in other layers, the first divergence from a golden), then "
                       "walks upstream through the graph replaying each producer in float64 "
                       "(msprobe-atb replay) to the op whose own result is wrong (own-error), "
                       "an input already bad when it entered the dump (a weight, a model "
                       "input, a KV cache an earlier round wrote), or an op whose exact result "
                       "leaves its dtype (overflow). Prints one line per process: root cause; "
                       "consequence.",
                       epilog=DIAGNOSE_EXITS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="the dump (output root or atb_dump_data)")
    p.add_argument("--golden", metavar="G", help="a golden dump (ATB, or a torch golden) to "
                   "find the first divergence against")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    _jobs(p)
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("convert", help=".bin to .npy, recursively, keeping the tree")
    p.add_argument("src", help="a .bin file or a directory")
    p.add_argument("-o", "--output", required=True, help="output directory (or .npy file)")
    _jobs(p)
    p.add_argument("--raw", action="store_true",
                   help="keep bf16/fp8/fp4 bit patterns and packed int4/uint1 bytes")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("overflow", help="overflow events in order, with the op's tensors")
    p.add_argument("dir", help="output root, atb_dump_data, data/, {dev}_{pid} or round dir")
    p.add_argument("--all", action="store_true",
                   help="derived events: also ops that only pass NaN/Inf on")
    p.add_argument("--limit", type=int, default=50, metavar="N",
                   help="show at most N events (50); --json lists them all")
    p.add_argument("--json", action="store_true", help="print the events as JSON")
    p.set_defaults(func=cmd_overflow)

    p = sub.add_parser("report", help="self-contained HTML report with plots")
    p.add_argument("dir", help="the dump to report on (output root or atb_dump_data)")
    p.add_argument("--golden", help="golden dump: adds the first divergent op at the top, the "
                   "error growth along the layers, the per-layer comparison and the worst "
                   "pairs; a golden built differently is not compared (the page says why, "
                   "exit 3)")
    p.add_argument("-o", "--output", default="report.html",
                   help="the HTML file to write (report.html)")
    p.add_argument("--json", action="store_true",
                   help="print what the report holds (sections, plots, first NaN/Inf, first "
                        "divergent tensor) as JSON")
    _jobs(p)
    p.set_defaults(func=cmd_report)
