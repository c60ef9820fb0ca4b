"""Durations on the command line are finite numbers a clock can reach: `wait
--timeout nan` used to wait forever and `--timeout -1` was taken as given."""

from __future__ import annotations

import pytest

from msprobe_atb.cli import build_parser

# (command line before the value, whether 0 is a valid value)
OPTIONS = [(["wait", "--timeout"], True), (["run", "--timeout"], True),
           (["trigger", "--wait"], True), (["status", "--interval"], False)]


@pytest.mark.parametrize("args,zero_ok", OPTIONS, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")
@pytest.mark.parametrize("value", ["nan", "NaN", "-1", "-0.5", "inf", "-inf", "1e999", "x", ""])
def test_a_duration_that_is_not_a_finite_number_of_seconds_is_refused(args, zero_ok, value,
                                                                        capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([*args[:-1], f"{args[-1]}={value}"])  # "=": -inf is a value
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {args[-1]}: {value!r} is not a number of seconds" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args,zero_ok", OPTIONS)
def test_finite_durations_are_taken(args, zero_ok):
    for value, want in (("2.5", 2.5), ("30", 30.0)) + ((("0", 0.0),) if zero_ok else ()):
        ns = build_parser().parse_args([*args, value])
        assert want in vars(ns).values()
