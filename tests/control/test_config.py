"""Config schema: validation messages, defaults, YAML, presets, compile mapping, `check`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from msprobe_atb.config import ConfigError, compile_config, load_config, validate
from msprobe_atb.config.compile import ASLEEP

REPO = Path(__file__).resolve().parents[2]


def problems(raw) -> str:
    with pytest.raises(ConfigError) as exc:
        validate(raw, "cfg.json")
    return "\n".join(exc.value.problems)


def test_defaults_match_msprobe():
    cfg = validate({})
    assert (cfg.task, cfg.dump_enable, cfg.exec_range, cfg.ids, cfg.op_name, cfg.save_child,
            cfg.device, cfg.filter_level) == ("tensor", False, "0,0", (), (), False, (), 1)
    assert cfg.ranges == ((0, 0),)
    assert (cfg.queue_budget_mb, cfg.queue_full_policy, cfg.overflow_nums) == (1024, "block", 1)
    assert cfg.save_all_stages is False  # msProbe's tree: inputs before, outputs after


@pytest.mark.parametrize("raw, expect", [
    ({"dump_enable": "true"}, ['"dump_enable": "true" is a string', "without quotes"]),
    ({"save_child": 1}, ['"save_child": 1', "true or false"]),
    ({"save_all_stages": "yes"}, ['"save_all_stages": "yes" is a string', "true or false"]),
    ({"device": 0}, ['"device": 0 is a number', 'give it as a string, e.g. "0"']),
    ({"exec_range": "3,1"}, ['"exec_range": "3,1" is reversed', '"1,3"']),
    ({"exec_range": "1,x"}, ['"exec_range": "1,x"', 'invalid bound "x"', '"all", "none"']),
    ({"exec_range": "-1,3"}, ['invalid bound "-1"']),
    ({"exec_range": "1,2,3"}, ["odd number of bounds"]),
    ({"exec_range": 5}, ['"exec_range": 5 is a number', 'e.g. "0,2"']),
    ({"task": "tensors"}, ['"task": "tensors" is not accepted', '"statistics"',
                           'did you mean "tensor"']),
    ({"task": 3}, ['"task": 3 is not accepted']),
    ({"dump_enabel": True}, ['unknown key "dump_enabel"', 'did you mean "dump_enable"']),
    ({"filter_level": 3}, ['"filter_level": 3', "0, 1 or 2"]),
    ({"filter_level": True}, ['"filter_level": true']),
    ({"filter_level": "1"}, ['"filter_level": "1" is a string']),
    ({"ids": "2,layer3"}, ['invalid op ids "layer3"']),
    ({"ids": 2}, ['"ids": 2 is a number', 'e.g. "2"']),
    ({"device": "0,gpu1"}, ['invalid device ids "gpu1"']),
    ({"queue_full_policy": "wait"}, ['"queue_full_policy": "wait"', '"block", "drop"']),
    ({"queue_budget_mb": 0}, ['"queue_budget_mb": 0']),
    ({"task": "overflow_check", "overflow_check": {"overflow_nums": 0}},
     ["overflow_nums", "-1 (no limit)"]),
    ({"overflow_check": {"check_mode": "aicore"}}, ['"check_mode": "aicore"', '"inf"']),
    ({"overflow_check": {"probe_scan": "yes"}}, ["overflow_check.probe_scan", "true or false"]),
    ({"task": "overflow_check", "overflow_check": {"check_mode": "nan"}},
     ['check_mode": "nan" finds nothing without "probe_scan": true']),
    ({"overflow_check": {"overflow_num": 2}}, ['unknown key "overflow_num"',
                                                'did you mean "overflow_nums"']),
])
def test_validation_names_field_value_and_accepted(raw, expect):
    text = problems(raw)
    for piece in expect:
        assert piece in text, f"{piece!r} not in {text!r}"


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as exc:
        validate({"dump_enable": "true", "device": 0, "exec_range": "3,1", "bogus": 1})
    assert len(exc.value.problems) == 4


def test_not_an_object():
    assert "must be an object" in problems([1, 2])


def test_lists_are_trimmed_and_lowercased():
    cfg = validate({"ids": " 2 , 3_1 ,, ", "op_name": " Word ,LINEAR", "device": " 0, 1 ,1",
                    "exec_range": " 0 , 2 , 5,6 "})
    assert cfg.ids == ("2", "3_1")
    assert cfg.op_name == ("word", "linear")
    assert cfg.device == (0, 1)
    assert cfg.ranges == ((0, 2), (5, 6))


def test_exec_range_forms():
    assert validate({"exec_range": "all"}).exec_mode == "all"
    assert validate({"exec_range": "none"}).exec_mode == "none"
    assert validate({"exec_range": "3"}).ranges == ((3, 3),)
    assert validate({"exec_range": ""}).ranges == ((0, 0),)
    assert "exec_range" in validate({"exec_range": ""}).notes[0]


def test_comment_keys_allowed():
    assert validate({"_comment": "anything", "dump_enable": True}).dump_enable


def test_compile_mapping():
    c = compile_config(validate({
        "task": "all", "dump_enable": True, "exec_range": "0,2,5,6", "ids": "2,3_1",
        "op_name": "Word", "save_child": True, "device": "1,3", "filter_level": 2,
        "queue_budget_mb": 64, "queue_full_policy": "drop"}))
    assert (c.state, c.task, c.exec_mode) == (1, 3, 2)
    assert c.ranges == ((0, 2), (5, 6))
    assert (c.ids, c.op_names, c.devices) == (("2", "3_1"), ("word",), (1, 3))
    assert (c.save_child, c.filter_level) == (1, 2)
    assert (c.queue_budget_bytes, c.queue_policy) == (64 << 20, 1)
    assert c.overflow_nums == -1
    assert compile_config(validate({"exec_range": "all"})).exec_mode == 1
    assert compile_config(validate({"exec_range": "none", "dump_enable": True})).exec_mode == 0
    assert compile_config(None) == ASLEEP
    o = compile_config(validate({"task": "overflow_check", "dump_enable": True,
                                 "overflow_check": {"overflow_nums": -1, "check_mode": "inf"}}))
    assert (o.task, o.overflow_nums, o.overflow_mode) == (4, -1, 1)
    assert o.overflow_scan == 0  # off by default: ATB would copy every kernel (README)
    scan = compile_config(validate({"task": "overflow_check", "dump_enable": True,
                                    "overflow_check": {"probe_scan": True}}))
    assert scan.overflow_scan == 1
    assert compile_config(validate({"task": "statistics"})).task == 2
    assert compile_config(validate({"task": "tensor"})).task == 1


def test_compiled_config_round_trips_through_block(tmp_path):
    from msprobe_atb.control.block import ControlBlock

    c = compile_config(validate({"task": "all", "dump_enable": True, "exec_range": "1,4",
                                 "ids": "2", "op_name": "lin", "device": "0,1",
                                 "save_all_stages": True}))
    assert c.save_all_stages == 1
    with ControlBlock(tmp_path / "atb_dump_data", create=True) as block:
        assert block.published == 0
        block.publish(c)
        gen, back = block.read_config()
        assert back == c and gen == 2 and block.published == 1
        block.set_error("bad edit")
        assert block.error == "bad edit" and block.error_seq == 1
        block.set_error("")
        assert block.error == "" and block.error_seq == 1


def test_yaml_and_json_files(tmp_path):
    y = tmp_path / "c.yaml"
    y.write_text("dump_enable: true\nexec_range: none\n")
    assert load_config(y).exec_mode == "none"
    j = tmp_path / "c.json"
    j.write_text('{"dump_enable": true,\n "task": "all",}')
    with pytest.raises(ConfigError, match="not valid JSON at line 2"):
        load_config(j)
    j.write_text('{"ids": "1", "ids": "2"}')
    with pytest.raises(ConfigError, match='"ids" is given twice'):
        load_config(j)
    j.write_text("  \n")
    with pytest.raises(ConfigError, match="empty"):
        load_config(j)
    y.write_text("dump_enable: [\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load_config(y)


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "configs").iterdir()
                                            if p.suffix in (".json", ".yaml", ".yml")))
def test_presets_are_valid(preset):
    load_config(REPO / "configs" / preset)


README_JSON = re.findall(r"^```json\n(.*?)^```$", (REPO / "README.md").read_text(),
                         re.M | re.S)


@pytest.mark.parametrize("snippet", README_JSON)
def test_readme_json_snippets_are_configs_as_pasted(snippet, tmp_path):
    """A reader pastes them into config.json: each must pass `check` whole."""
    (tmp_path / "config.json").write_text(snippet)
    load_config(tmp_path / "config.json")


def test_presets_follow_the_documented_jobs():
    example = load_config(REPO / "configs" / "config.json")
    assert not example.dump_enable and example.exec_mode == "all"
    wake = load_config(REPO / "configs" / "wake_up.json")
    assert wake.dump_enable and wake.exec_mode == "none"
    assert load_config(REPO / "configs" / "overflow_hunt.yaml").task == "overflow_check"
    layer = load_config(REPO / "configs" / "one_layer_with_children.yaml")
    assert layer.save_child and layer.ids


def _check(*args):
    return subprocess.run([sys.executable, "-c",
                           "import sys; from msprobe_atb.config.cli import register, run;"
                           "import argparse; p = argparse.ArgumentParser();"
                           "register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]);"
                           "sys.exit(a.func(a))", "check", *args],
                          capture_output=True, text=True, cwd=REPO)


def test_check_command(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"dump_enable": True, "ids": "2", "exec_range": "all"}))
    r = _check(str(good))
    assert r.returncode == 0, r.stderr
    assert "valid" in r.stdout and "ops with id 2" in r.stdout
    assert "every execution round" in r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"dump_enable": "true"}))
    r = _check(str(bad))
    assert r.returncode == 1 and '"dump_enable": "true" is a string' in r.stderr
    r = _check(str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "no such file" in r.stderr
    r = _check(str(good), "--json")
    assert json.loads(r.stdout)["ids"] == "2"


def test_check_describes_an_armed_recorder_as_writing_nothing_until_a_trigger(tmp_path):
    cfg = tmp_path / "rec.json"
    cfg.write_text(json.dumps({"dump_enable": True, "exec_range": "all", "recorder": {
        "keep_rounds": 3, "after_rounds": 2, "triggers": ["nan", {"abs_max_over": 60000}]}}))
    r = _check(str(cfg))
    assert r.returncode == 0, r.stderr
    said = r.stdout.split("what it does:")[1]
    assert "armed flight recorder: nothing is written until a trigger fires" in said
    assert "triggers: nan, abs_max_over 60000" in said
    assert "the last 3 rounds" in said and "the 3 before it and 2 after" in said
    assert "dumps" not in said
