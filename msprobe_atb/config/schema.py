"""The dump config: msProbe's fields (docs/msprobe_format.md §3.3) plus ours, validation with
messages a person can act on; `compile.py` turns the result into the control block's form.

Validation collects every problem of a file, each naming the field, the bad
value and what is accepted, so one edit can fix them all.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from msprobe_atb.config.recorder import Recorder, validate_recorder
from msprobe_atb.config.render import key_text, show, type_name

# Limits of the control block (control.h); kept here so `check` needs no extension.
MAX_RANGES = 32
MAX_IDS = 128
ID_LEN = 64
MAX_OP_NAMES = 64
OP_NAME_LEN = 128
MAX_DEVICES = 64

TASKS = ("tensor", "statistics", "all", "overflow_check")
CHECK_MODES = ("all", "inf", "nan")
POLICIES = ("block", "drop")

DEFAULTS: dict[str, Any] = {
    "task": "tensor",
    "dump_enable": False,
    "exec_range": "0,0",
    "ids": "",
    "op_name": "",
    "save_child": False,
    "device": "",
    "filter_level": 1,
    "save_all_stages": False,
    "overflow_check": {"overflow_nums": 1, "check_mode": "all", "probe_scan": False},
    "queue_budget_mb": 1024,
    "queue_full_policy": "block",
    "recorder": None,
}
OVERFLOW_KEYS = ("overflow_nums", "check_mode", "probe_scan")
MAX_QUEUE_BUDGET_MB = 1 << 20  # 1 TiB: anything larger is a typo

# Python refuses to print integers of more than 4300 digits (int_max_str_digits);
# a bound or an id is at most 19 digits, so a longer digit string is refused by length.
MAX_INT_DIGITS = 19

_ID_RE = re.compile(r"^[0-9]+(_[0-9]+)*$")
_UINT_RE = re.compile(r"[0-9]+")


def _uint(text: str) -> bool:
    """A non-negative decimal integer short enough to convert."""
    return len(text) <= MAX_INT_DIGITS and _UINT_RE.fullmatch(text) is not None


class ConfigError(ValueError):
    """A config that cannot be used; `problems` lists every reason."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


@dataclass(frozen=True)
class Config:
    """A validated config with every default filled in."""

    task: str = "tensor"
    dump_enable: bool = False
    exec_range: str = "0,0"
    ids: tuple[str, ...] = ()
    op_name: tuple[str, ...] = ()
    save_child: bool = False
    device: tuple[int, ...] = ()
    filter_level: int = 1
    save_all_stages: bool = False
    overflow_nums: int = 1
    check_mode: str = "all"
    probe_scan: bool = False
    queue_budget_mb: int = 1024
    queue_full_policy: str = "block"
    exec_mode: str = "ranges"  # "all" | "none" | "ranges" | "next" (ranges: the first N)
    ranges: tuple[tuple[int, int], ...] = ((0, 0),)
    recorder: Recorder | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)

    def effective(self) -> dict[str, Any]:
        """The config as a user would write it, defaults included."""
        return {
            "task": self.task,
            "dump_enable": self.dump_enable,
            "exec_range": self.exec_range,
            "ids": ",".join(self.ids),
            "op_name": ",".join(self.op_name),
            "save_child": self.save_child,
            "device": ",".join(str(d) for d in self.device),
            "filter_level": self.filter_level,
            "save_all_stages": self.save_all_stages,
            "overflow_check": {"overflow_nums": self.overflow_nums, "check_mode": self.check_mode,
                               "probe_scan": self.probe_scan},
            "queue_budget_mb": self.queue_budget_mb,
            "queue_full_policy": self.queue_full_policy,
            "recorder": self.recorder.effective() if self.recorder else None,
        }


def _split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


class _Validator:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.notes: list[str] = []

    def bad(self, key: str, value: Any, what: str) -> None:
        self.problems.append(f'"{key}": {show(value)} {what}')

    def boolean(self, raw: dict, key: str) -> bool:
        value = raw.get(key, DEFAULTS[key])
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            self.bad(key, value, f"is a string; write {value.strip().lower()} without quotes "
                     "(a JSON boolean: true or false)")
        else:
            self.bad(key, value, f"is {type_name(value)}; accepted values: true or false")
        return DEFAULTS[key]

    def string(self, raw: dict, key: str, example: str) -> str | None:
        value = raw.get(key, DEFAULTS[key])
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.bad(key, value, f'is a number; give it as a string, e.g. "{example}"')
        elif isinstance(value, (list, tuple)):
            self.bad(key, value, f'is a list; give a comma-separated string, e.g. "{example}"')
        else:
            self.bad(key, value, f'is {type_name(value)}; give a string, e.g. "{example}"')
        return None

    def choice(self, raw: dict, key: str, accepted: tuple[str, ...], default: Any) -> str:
        value = raw.get(key, default)
        if isinstance(value, str) and value == "" and key == "task":
            return default  # msProbe: an empty task means the default
        if isinstance(value, str) and value in accepted:
            return value
        hint = ""
        if isinstance(value, str):
            close = difflib.get_close_matches(value.strip().lower(), accepted, n=1, cutoff=0.6)
            if close:
                hint = f' (did you mean "{close[0]}"?)'
        self.bad(key, value, f"is not accepted; accepted values: "
                 f"{', '.join(show(a) for a in accepted)}{hint}")
        return default

    def integer(self, raw: dict, key: str, lo: int, hi: int, default: Any, accepted: str) -> int:
        value = raw.get(key, default)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            self.bad(key, value, f"is a string; write it as a number without quotes ({accepted})")
        else:
            self.bad(key, value, f"is not accepted; accepted values: {accepted}")
        return default


def _exec_range(v: _Validator, raw: dict) -> tuple[str, str, tuple[tuple[int, int], ...]]:
    text = v.string(raw, "exec_range", "0,2")
    default = ("0,0", "ranges", ((0, 0),))
    if text is None:
        return default
    norm = text.strip()
    if norm == "":
        v.notes.append('exec_range "" means the default "0,0" (the first execution round only)')
        return default
    if norm.lower() in ("all", "none"):
        return norm.lower(), norm.lower(), ()
    accepted = ('accepted: "all", "none", "start,end" (inclusive, e.g. "0,2"), several pairs '
                '"0,2,5,6", one round "3", or "next" / "next:N" (the next N executions of each '
                'model)')
    word, _, count = norm.partition(":")
    if word.strip().lower() == "next":
        count = count.strip() if _ else "1"
        if not _uint(count) or not 1 <= int(count) < 1 << 62:
            v.bad("exec_range", text, f"asks for {show(count)} executions; N in \"next:N\" is a "
                  f"whole number from 1; {accepted}")
            return default
        # Each process fixes each model's N rounds when it next begins (native models.c);
        # these first N rounds are for a process that knows no model.
        return f"next:{int(count)}", "next", ((0, int(count) - 1),)
    tokens = [t.strip() for t in norm.split(",")]
    bad = [t for t in tokens if not _uint(t) or int(t) >= 1 << 63]
    if bad:
        v.bad("exec_range", text, f"has {'an invalid bound' if len(bad) == 1 else 'invalid bounds'}"
              f" {', '.join(show(b) for b in bad)}; bounds are non-negative integers; {accepted}")
        return default
    nums = [int(t) for t in tokens]
    if len(nums) == 1:
        pairs = [(nums[0], nums[0])]
    elif len(nums) % 2:
        v.bad("exec_range", text, f"has an odd number of bounds ({len(nums)}); {accepted}")
        return default
    else:
        pairs = list(zip(nums[0::2], nums[1::2]))
    reversed_pairs = [p for p in pairs if p[0] > p[1]]
    if reversed_pairs:
        a, b = reversed_pairs[0]
        v.bad("exec_range", text, f'is reversed ({a} > {b}); write the smaller round first, '
              f'e.g. "{b},{a}"')
        return default
    if len(pairs) > MAX_RANGES:
        v.bad("exec_range", text, f"has {len(pairs)} ranges; at most {MAX_RANGES} are supported")
        return default
    return ",".join(tokens), "ranges", tuple(pairs)


def _ids(v: _Validator, raw: dict) -> tuple[str, ...]:
    text = v.string(raw, "ids", "2")
    if text is None:
        return ()
    items = _split_list(text)
    bad = [i for i in items if not _ID_RE.match(i)]
    if bad:
        v.bad("ids", text, f"has invalid op ids {', '.join(show(b) for b in bad)}; an op id is "
              'numbers joined by "_", e.g. "2", "2_1", "2_1_0"; give several as "0,2_1"')
        return ()
    long = [i for i in items if len(i.encode()) >= ID_LEN]
    if long or len(items) > MAX_IDS:
        v.bad("ids", text, f"is too long: at most {MAX_IDS} ids of at most {ID_LEN - 1} characters")
        return ()
    return tuple(items)


def _op_names(v: _Validator, raw: dict) -> tuple[str, ...]:
    text = v.string(raw, "op_name", "word")
    if text is None:
        return ()
    items = [i.lower() for i in _split_list(text)]
    long = [i for i in items if len(i.encode()) >= OP_NAME_LEN]
    if long or len(items) > MAX_OP_NAMES:
        v.bad("op_name", text, f"is too long: at most {MAX_OP_NAMES} names of at most "
              f"{OP_NAME_LEN - 1} bytes")
        return ()
    return tuple(items)


def _devices(v: _Validator, raw: dict) -> tuple[int, ...]:
    text = v.string(raw, "device", "0")
    if text is None:
        return ()
    items = _split_list(text)
    bad = [i for i in items if not _uint(i) or int(i) > 2**31 - 1]
    if bad:
        v.bad("device", text, f"has invalid device ids {', '.join(show(b) for b in bad)}; "
              'give device ids as a comma-separated string, e.g. "0" or "0,1"')
        return ()
    if len(items) > MAX_DEVICES:
        v.bad("device", text, f"lists {len(items)} devices; at most {MAX_DEVICES} are supported")
        return ()
    return tuple(dict.fromkeys(int(i) for i in items))


def _overflow(v: _Validator, raw: dict, task: str) -> tuple[int, str, bool]:
    default = DEFAULTS["overflow_check"]
    value = raw.get("overflow_check", default)
    if not isinstance(value, dict):
        v.bad("overflow_check", value, f"is {type_name(value)}; give an object, e.g. "
              '{"overflow_nums": 1, "check_mode": "all"}')
        return default["overflow_nums"], default["check_mode"], default["probe_scan"]
    for key in value:
        if key not in OVERFLOW_KEYS:
            close = difflib.get_close_matches(key_text(key), OVERFLOW_KEYS, n=1, cutoff=0.5)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            v.problems.append(f'"overflow_check": unknown key {key_text(key, True)}{hint}; '
                              'accepted keys: '
                              + ", ".join(f'"{k}"' for k in OVERFLOW_KEYS))
    nums = value.get("overflow_nums", default["overflow_nums"])
    if not (isinstance(nums, int) and not isinstance(nums, bool) and (nums == -1 or nums >= 1)):
        v.bad("overflow_check.overflow_nums", nums,
              "is not accepted; give a whole number >= 1 (stop after N overflows) or -1 (no limit)")
        nums = default["overflow_nums"]
    mode = v.choice(value, "check_mode", CHECK_MODES, default["check_mode"])
    scan = value.get("probe_scan", default["probe_scan"])
    if not isinstance(scan, bool):
        v.bad("overflow_check.probe_scan", scan,
              f"is {type_name(scan)}; accepted values: true or false")
        scan = default["probe_scan"]
    if mode == "nan" and not scan and task == "overflow_check":
        v.problems.append('"overflow_check.check_mode": "nan" finds nothing without '
                          '"probe_scan": true (ATB\'s own scan reports Inf only, never NaN)')
    if "overflow_check" in raw and task != "overflow_check":
        v.notes.append(f'"overflow_check" is ignored because task is "{task}"')
    return nums, mode, scan


def validate(raw: Any, source: str = "config") -> Config:
    """Checks a parsed config document; raises ConfigError listing every problem."""
    if not isinstance(raw, dict):
        raise ConfigError(source, ["the config must be an object of fields, got "
                                   f"{type_name(raw)}"])
    v = _Validator()
    for key in raw:
        if key in DEFAULTS or (isinstance(key, str) and key.startswith("_")):
            continue  # keys starting with "_" are comments
        close = difflib.get_close_matches(key_text(key), list(DEFAULTS), n=1, cutoff=0.5)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        v.problems.append(f'unknown key {key_text(key, True)}{hint} '
                          f'(known keys: {", ".join(DEFAULTS)}; '
                          'keys starting with "_" are comments)')
    task = v.choice(raw, "task", TASKS, DEFAULTS["task"])
    dump_enable = v.boolean(raw, "dump_enable")
    exec_text, exec_mode, ranges = _exec_range(v, raw)
    ids = _ids(v, raw)
    op_names = _op_names(v, raw)
    save_child = v.boolean(raw, "save_child")
    devices = _devices(v, raw)
    filter_level = v.integer(raw, "filter_level", 0, 2, 1, "0, 1 or 2")
    all_stages = v.boolean(raw, "save_all_stages")
    overflow_nums, check_mode, probe_scan = _overflow(v, raw, task)
    budget = v.integer(raw, "queue_budget_mb", 1, MAX_QUEUE_BUDGET_MB, 1024,
                       f"a whole number of MiB from 1 to {MAX_QUEUE_BUDGET_MB}")
    policy = v.choice(raw, "queue_full_policy", POLICIES, "block")
    recorder = validate_recorder(v, raw.get("recorder"), task)
    if v.problems:
        raise ConfigError(source, v.problems)
    return Config(
        task=task, dump_enable=dump_enable, exec_range=exec_text, ids=ids, op_name=op_names,
        save_child=save_child, device=devices, filter_level=filter_level,
        save_all_stages=all_stages, overflow_nums=overflow_nums, check_mode=check_mode,
        probe_scan=probe_scan,
        queue_budget_mb=budget,
        queue_full_policy=policy, exec_mode=exec_mode, ranges=ranges, recorder=recorder,
        notes=tuple(v.notes),
    )
