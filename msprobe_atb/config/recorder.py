"""The `recorder` block of the config (the flight recorder, README "The flight recorder"):
validation with messages that name the field, and its compiled form.

    "recorder": {"keep_rounds": 4, "budget_mb": 2048,
                 "triggers": ["nan", "inf", "overflow", {"abs_max_over": 60000},
                              {"growth_over": 10},
                              {"golden": "golden/statistic.csv", "rtol": 0.05}],
                 "after_rounds": 1, "max_incidents": 1, "flush_on_exit": false}
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any

# Trigger bits (control.h MSP_TRIG_*).
TRIG_BITS = {"nan": 1, "inf": 2, "overflow": 4, "abs_max_over": 8, "growth_over": 16,
             "golden": 32, "manual": 64}
TRIG_NAMES = {v: k for k, v in TRIG_BITS.items()}
PLAIN_TRIGGERS = ("nan", "inf", "overflow")
KEYS = ("keep_rounds", "budget_mb", "triggers", "after_rounds", "max_incidents", "flush_on_exit")
DEFAULTS: dict[str, Any] = {"keep_rounds": 4, "budget_mb": 2048, "triggers": ["nan", "inf"],
                            "after_rounds": 1, "max_incidents": 1, "flush_on_exit": False}
MAX_KEEP_ROUNDS = 1000
MAX_INCIDENTS = 64  # the control block's incident table (control.h MSP_REC_MAX_INCIDENTS)
MAX_BUDGET_MB = 1 << 20
_EXAMPLE = ('["nan", "inf", "overflow", {"abs_max_over": 60000}, {"growth_over": 10}, '
            '{"golden": "golden/statistic.csv", "rtol": 0.05}]')


@dataclass(frozen=True)
class Recorder:
    keep_rounds: int = 4
    budget_mb: int = 2048
    triggers: tuple[str, ...] = ("nan", "inf")
    abs_max_over: float | None = None
    growth_over: float | None = None
    golden: str | None = None
    rtol: float = 0.05
    after_rounds: int = 1
    max_incidents: int = 1
    flush_on_exit: bool = False

    @property
    def trigger_bits(self) -> int:
        return sum(TRIG_BITS[t] for t in self.triggers)

    def effective(self) -> dict[str, Any]:
        trig: list[Any] = []
        for t in self.triggers:
            if t == "abs_max_over":
                trig.append({"abs_max_over": self.abs_max_over})
            elif t == "growth_over":
                trig.append({"growth_over": self.growth_over})
            elif t == "golden":
                trig.append({"golden": self.golden, "rtol": self.rtol})
            else:
                trig.append(t)
        return {"keep_rounds": self.keep_rounds, "budget_mb": self.budget_mb, "triggers": trig,
                "after_rounds": self.after_rounds, "max_incidents": self.max_incidents,
                "flush_on_exit": self.flush_on_exit}


def _number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _trigger(v, i: int, item: Any, out: dict[str, Any]) -> None:
    where = f"recorder.triggers[{i}]"
    if isinstance(item, str):
        name = item.strip().lower()
        if name in ("+inf", "-inf"):
            name = "inf"
        if name in PLAIN_TRIGGERS:
            out.setdefault("names", []).append(name)
            return
        close = difflib.get_close_matches(name, list(PLAIN_TRIGGERS) + ["abs_max_over",
                                                                        "growth_over", "golden"], 1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        if name in ("abs_max_over", "growth_over", "golden"):
            hint = f'; "{name}" needs a value, e.g. {{"{name}": ...}}'
        v.bad(where, item, f'is not a trigger{hint}; accepted: "nan", "inf", "overflow", '
              '{"abs_max_over": N}, {"growth_over": F}, {"golden": "PATH", "rtol": R}')
        return
    if not isinstance(item, dict) or not item:
        v.bad(where, item, f"is not a trigger; give a name or an object, e.g. {_EXAMPLE}")
        return
    keys = set(item)
    if "golden" in keys:
        extra = keys - {"golden", "rtol"}
        path, rtol = item["golden"], item.get("rtol", 0.05)
        if extra:
            v.bad(where, item, f'has unknown keys {sorted(extra)}; a golden trigger is '
                  '{"golden": "golden/statistic.csv", "rtol": 0.05}')
        elif not isinstance(path, str) or not path.strip():
            v.bad(f"{where}.golden", path, "is not accepted; give the path of a statistic.csv "
                  "made by a good run (or its dump dir), relative to the config file")
        elif not _number(rtol) or rtol <= 0:
            v.bad(f"{where}.rtol", rtol, "is not accepted; give a relative tolerance > 0, "
                  "e.g. 0.05")
        else:
            out.setdefault("names", []).append("golden")
            out["golden"], out["rtol"] = path.strip(), float(rtol)
        return
    if len(keys) != 1 or not keys <= {"abs_max_over", "growth_over"}:
        v.bad(where, item, 'is not a trigger; objects are {"abs_max_over": N}, '
              '{"growth_over": F} or {"golden": "PATH", "rtol": R}')
        return
    (key,) = keys
    value = item[key]
    lo = 1.0 if key == "growth_over" else 0.0
    if not _number(value) or value <= lo:
        what = ("a factor > 1 (a statistic beyond F times its envelope from earlier rounds "
                "fires)" if key == "growth_over" else "a bound > 0 (|max| or |min| beyond it "
                "fires)")
        v.bad(f"{where}.{key}", value, f"is not accepted; give {what}")
        return
    out.setdefault("names", []).append(key)
    out[key] = float(value)


def validate_recorder(v, raw: Any, task: str) -> Recorder | None:
    """Checks the `recorder` value (None or absent: off); problems go to v."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        v.bad("recorder", raw, "is not accepted; give an object, e.g. "
              '{"keep_rounds": 4, "budget_mb": 2048, "triggers": ["nan", "inf"]}, or null (off)')
        return None
    for key in raw:
        if key not in KEYS and not (isinstance(key, str) and key.startswith("_")):
            close = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.5)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            v.problems.append(f'"recorder": unknown key "{key}"{hint}; accepted keys: '
                              + ", ".join(f'"{k}"' for k in KEYS))
    full = {**DEFAULTS, **raw}
    n0 = len(v.problems)
    keep = v.integer(full, "keep_rounds", 0, MAX_KEEP_ROUNDS, 4,
                     f"a whole number of rounds from 0 to {MAX_KEEP_ROUNDS}")
    budget = v.integer(full, "budget_mb", 1, MAX_BUDGET_MB, 2048,
                       f"a whole number of MiB from 1 to {MAX_BUDGET_MB}")
    after = v.integer(full, "after_rounds", 0, MAX_KEEP_ROUNDS, 1,
                      f"a whole number of rounds from 0 to {MAX_KEEP_ROUNDS}")
    most = v.integer(full, "max_incidents", 1, MAX_INCIDENTS, 1,
                     f"a whole number from 1 to {MAX_INCIDENTS}")
    flush = full["flush_on_exit"]
    if not isinstance(flush, bool):
        v.bad("recorder.flush_on_exit", flush, "is not accepted; accepted values: true or false")
    trig = full["triggers"]
    parsed: dict[str, Any] = {}
    if not isinstance(trig, list) or not trig:
        v.bad("recorder.triggers", trig, f"is not accepted; give a non-empty list, e.g. {_EXAMPLE}")
    else:
        for i, item in enumerate(trig):
            _trigger(v, i, item, parsed)
    if task == "overflow_check":
        v.problems.append('"recorder": does not work with task "overflow_check"; use the '
                          '"overflow" trigger with task "tensor", "statistics" or "all"')
    # v.integer names the bare key; say where it lives
    v.problems[n0:] = [p.replace('"keep_rounds"', '"recorder.keep_rounds"')
                       .replace('"budget_mb"', '"recorder.budget_mb"')
                       .replace('"after_rounds"', '"recorder.after_rounds"')
                       .replace('"max_incidents"', '"recorder.max_incidents"')
                       for p in v.problems[n0:]]
    if len(v.problems) > n0:
        return None
    return Recorder(keep_rounds=keep, budget_mb=budget,
                    triggers=tuple(dict.fromkeys(parsed.get("names", []))),
                    abs_max_over=parsed.get("abs_max_over"), growth_over=parsed.get("growth_over"),
                    golden=parsed.get("golden"), rtol=parsed.get("rtol", 0.05),
                    after_rounds=after, max_incidents=most, flush_on_exit=flush)
