"""`msprobe-atb bisect`: which ops must run in higher precision to bring a round's output
back to the golden, from one dump.

Imports stay inside the command so that registering it costs nothing at start-up.
"""

from __future__ import annotations

import json
import sys

EXIT_OK, EXIT_NOT_REACHED, EXIT_ERROR = 0, 1, 2
# The default target is the dtype's own noise (every op a correct kernel of its dtype)
# times this: a clean run's own rounding, which the deployed run repeats op by op but
# not bit for bit, must not count as a defect.
NOISE_MARGIN = 1.5


def _error(msg: str) -> int:
    print(f"msprobe-atb bisect: error: {msg}", file=sys.stderr)
    return EXIT_ERROR


def _positive(text: str, what: str, kind=float):
    try:
        v = kind(text)
    except ValueError:
        v = None
    if v is None or not v > 0 or v != v or v == float("inf"):
        raise ValueError(f"{what} {text!r}: expected a positive {kind.__name__}")
    return v


def _dtype_noise(err) -> tuple[float, str]:
    """The default target: the error of the run with every op emulated, with its margin."""
    from .search import relative_error

    noise = relative_error(err.output(rest="emulated"), err.golden)
    return noise * NOISE_MARGIN, (f"the dtype's own noise, every op a correct kernel of its "
                                  f"dtype: {noise:.3g}, times {NOISE_MARGIN:g}")


def cmd_bisect(a) -> int:
    from ..read.emit import emit
    from ..read.jsonsafe import jsonable
    from ..read.layout import DumpNotFound
    from ..read.progress import progress_bar
    from ..read.table import filter_tensors, open_dump
    from ..replay.refs import NotReplayable
    from .chain import Chain, ChainError
    from .golden import golden_output
    from .search import Evaluator, largest_difference, search
    from .summary import document
    from .text import format_text

    try:
        target = None if a.target is None else _positive(a.target, "--target")
        budget = None if a.budget is None else _positive(a.budget, "--budget", int)
        if a.op and a.metric != "output":
            raise ValueError("--op names the op of --metric output")
        dump = open_dump(a.dir)
        dump.tensors = filter_tensors(dump.tensors, round=a.round)
        with progress_bar("bisect: load", "op") as bar:
            chain = Chain(dump, a.round, a.model, bar.update)
        out_step = chain.step_of(a.op) if a.op else len(chain.steps) - 1
        with progress_bar("bisect: chained runs", "run") as bar:
            err = Evaluator(chain, out_step, budget, bar.update)
            deployed = err.output()
            drift = largest_difference(deployed, chain.dumped_output(out_step))
            if a.golden:
                golden = golden_output(a.golden, a.round, chain.steps[out_step].op.op_id,
                                       deployed)
            else:
                golden = err.output(rest="promoted")
            err.measure_against(golden, deployed)
            target, target_from = (target, "--target") if target is not None else \
                _dtype_noise(err)
            res = search(err, chain.searchable, target)
    except (DumpNotFound, ValueError, ChainError, NotReplayable) as e:
        return _error(str(e))
    what = a.golden or "the all-float64 chained run"
    doc = document(chain, res, metric=a.metric, out_step=out_step, golden=what,
                   target_from=target_from, evaluations=err.evaluations, drift=drift)
    text = json.dumps(jsonable(doc), indent=1) if a.json else format_text(doc)
    try:
        emit(text, a.output, f"bisect: {len(doc['chosen'])} op(s) to promote")
    except ValueError as e:
        return _error(str(e))
    return EXIT_OK if res.reached else EXIT_NOT_REACHED


def register(sub) -> None:
    p = sub.add_parser("bisect", help="which ops must run in higher precision (fp32) to bring "
                                      "a round's output back to the golden, from one dump "
                                      "(exit 1 if the target is not reached)")
    p.add_argument("dir", metavar="DIR", help="the dump (output root, atb_dump_data, data/, "
                                              "{dev}_{pid} or round dir), with save_child")
    p.add_argument("--golden", metavar="G", help="a golden dump (ATB, e.g. fp32, or a torch "
                   "golden) of the same model and input (default: the all-float64 chained run "
                   "of DIR)")
    p.add_argument("--round", type=int, default=0, metavar="R",
                   help="the round directory (default 0)")
    p.add_argument("--model", metavar="NAME", help="the model of that round to run (default: "
                   "the one that runs first in it, the prefill in round 0)")
    p.add_argument("--metric", choices=("logits", "output"), default="logits",
                   help="the error of the round's last op's output (logits, the default), or "
                        "of the output of the op --op names")
    p.add_argument("--op", metavar="ID", help="with --metric output: the op (an id, 2_9; a "
                   "graph: its last op)")
    p.add_argument("--budget", metavar="N", help="at most N chained runs; the best set found "
                   "by then is printed")
    p.add_argument("--target", metavar="T", help="the relative error to bring the output under "
                   "(default: the dtype's own noise, every op a correct kernel of its dtype, "
                   f"times {NOISE_MARGIN:g})")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-o", "--output", metavar="FILE", help="write the result to FILE")
    p.set_defaults(func=cmd_bisect)
