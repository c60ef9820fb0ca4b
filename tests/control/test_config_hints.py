"""JSON syntax errors get a hint in the words of the usual mistake, as field errors do."""

from __future__ import annotations

import pytest

from msprobe_atb.config.loader import load_bytes
from msprobe_atb.config.schema import ConfigError


@pytest.mark.parametrize("text, hint", [
    ('{"dump_enable": True}', "JSON spells True as true"),
    ('{"dump_enable": false, "ids": None}', "JSON spells None as null"),
    ('{"dump_enable": true,}', "remove the comma before '}'"),
    ('{"ids": "2", "exec_range": [0, 1,]}', "remove the comma before ']'"),
    ("{'dump_enable': true}", "need double quotes"),
    ('{dump_enable: true}', "needs double quotes"),
    ('{"dump_enable": true, // on\n}', "JSON has no comments"),
    ('{"dump_enable": true} # on', "JSON has no comments"),
    ('"dump_enable": true, "recorder": {"triggers": ["nan"]}', "put it between '{' and '}'"),
    ('\n  "dump_enable": true\n', "put it between '{' and '}'"),
])
def test_json_syntax_hints(text, hint):
    with pytest.raises(ConfigError) as e:
        load_bytes(text.encode(), "config.json")
    msg = str(e.value)
    assert "not valid JSON at line" in msg and hint in msg, msg


def test_no_hint_where_none_fits():
    with pytest.raises(ConfigError) as e:
        load_bytes(b'{"dump_enable": true', "config.json")
    assert "not valid JSON" in str(e.value) and "; " not in str(e.value).split("JSON at")[1]
