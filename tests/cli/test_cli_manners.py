"""The `msprobe-atb` command's manners: --version, help texts, internal commands
kept out of the listing, a reader that leaves the pipe early."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from msprobe_atb.cli import COMMAND_MODULES, INTERNAL_COMMANDS, build_parser, main
from msprobe_atb.offline.stats.summary import ranges_text

REPO = Path(__file__).resolve().parents[2]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    act = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(act.choices)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("msprobe-atb ") and out.split()[1][0].isdigit()


def test_each_module_registers_the_commands_its_table_names():
    # a named command is parsed with its own module alone (cli.py): a command
    # missing from the table would build every module, a wrong one would fail
    for module, commands in COMMAND_MODULES.items():
        assert tuple(_subparsers(build_parser((module,)))) == commands, module


def test_a_named_command_imports_only_its_own_module():
    probe = ("import sys, contextlib, io\n"
             "from msprobe_atb.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try: main(['check', '--help'])\n"
             "    except SystemExit: pass\n"
             "print(sorted(m for m in ('msprobe_atb.offline.cli', 'msprobe_atb.daemon.cli',"
             " 'polars') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_every_subcommand_help_opens_with_its_summary():
    for name, p in _subparsers(build_parser()).items():
        help_text = p.format_help()
        assert p.description, f"{name} --help has no description line"
        assert p.description in " ".join(help_text.split()) or p.description in help_text


def test_every_option_has_help():
    for name, p in _subparsers(build_parser()).items():
        for act in p._actions:
            if act.option_strings and act.dest != "help":
                assert act.help, f"msprobe-atb {name} {act.option_strings[0]} has no help text"


def test_internal_commands_are_hidden_but_work(capsys):
    top = build_parser().format_help()
    for name in INTERNAL_COMMANDS:
        assert f"    {name} " not in top
        with pytest.raises(SystemExit) as e:
            main([name, "--help"])
        assert e.value.code == 0
        assert f"msprobe-atb {name}" in capsys.readouterr().out


def test_broken_pipe_is_quiet(synth_dump):
    """`stats --json | head -1` ends without a traceback."""
    r = subprocess.run(["bash", "-c", f'"{sys.executable}" -m msprobe_atb stats --json '
                        f'"{synth_dump}" | head -c 10 >/dev/null; '
                        'echo "rc=${PIPESTATUS[0]}"'],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr, r.stderr
    assert "rc=0" in r.stdout or "rc=141" in r.stdout


@pytest.mark.parametrize("values, text", [
    ([1, 2, 6], "1-2,6"), ([0], "0"), ([0, 1, 2, 3], "0-3"), ([5, 3, 9, 4], "3-5,9"),
    ([1, 3], "1,3"), ([], "")])
def test_rounds_are_printed_as_runs(values, text):
    assert ranges_text(values) == text


def test_verify_says_what_it_checked(synth_dump):
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", "stats", "--verify", str(synth_dump)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "verify: every file's header, size and alias target is sound" in r.stdout


def test_a_mistyped_command_gets_a_suggestion_not_the_internal_list(capsys):
    assert main(["stast", "x"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'stast'; did you mean 'stats'?" in err
    assert "daemon" not in err and "compare" in err
