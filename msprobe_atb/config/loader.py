"""Reading a config file (JSON, or YAML by extension) into a validated Config."""

from __future__ import annotations

import json
import os
from typing import Any

from msprobe_atb.config.filecheck import FileRefused, open_config
from msprobe_atb.config.schema import Config, ConfigError, validate

MAX_CONFIG_BYTES = 16 << 20
YAML_SUFFIXES = (".yaml", ".yml")
TOO_DEEP = ("nested too deeply to read (lists or objects inside each other hundreds of "
            "levels deep); a config is one flat object")


class ConfigMissing(FileNotFoundError):
    """The config file does not exist (which means: asleep)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f'key "{key}" is given twice')
        out[key] = value
    return out


def _object_body(text: str) -> bool:
    """Whether the text is the keys of an object without its braces, as a snippet
    copied from inside a bigger config is ("Extra data" alone says nothing of it)."""
    try:
        return isinstance(json.loads("{" + text + "}"), dict)
    except (ValueError, RecursionError):
        return False


def json_hint(text: str, pos: int) -> str:
    """What most likely went wrong at a JSON syntax error, in the words of the
    usual mistakes (Python literals, a trailing comma, comments, single quotes)."""
    if _object_body(text):
        return ("; the text is the inside of an object (a snippet?): put it between "
                "'{' and '}'")
    rest = text[pos:]
    before = text[:pos].rstrip()
    for word, right in (("True", "true"), ("False", "false"), ("None", "null")):
        if rest.startswith(word):
            return f"; JSON spells {word} as {right}"
    if rest[:1] in ("}", "]") and before.endswith(","):
        return f"; remove the comma before '{rest[0]}' (JSON allows no trailing comma)"
    if rest.startswith(("//", "/*", "#")):
        return ("; JSON has no comments: use a key starting with '_' (\"_note\": \"...\"), "
                "or write the config as YAML (.yaml)")
    if rest.startswith("'"):
        return "; JSON strings and keys need double quotes (\"...\"), not single quotes"
    if rest[:1].isalpha() or rest[:1] == "_":
        return "; a key or text value needs double quotes around it"
    return ""


def parse_text(text: str, source: str, yaml_format: bool) -> Any:
    """Parses the document; raises ConfigError with the position of a syntax error."""
    if not text.strip():
        raise ConfigError(source, ["the file is empty; write a config object, e.g. "
                                   '{"dump_enable": true}'])
    if yaml_format:
        import yaml  # only YAML users pay for the import

        try:
            return yaml.safe_load(text)
        except RecursionError:
            raise ConfigError(source, [TOO_DEEP]) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(source, [f"not valid YAML{where}: {problem}"]) from None
        except Exception as exc:  # PyYAML's constructors raise plain errors, e.g. for
            # an integer of more than 4300 digits or a date like 2020-13-45
            raise ConfigError(source, [f"not valid YAML: {_value_error(exc)}"]) from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ConfigError(source, [f"not valid JSON at line {exc.lineno}, column {exc.colno}: "
                                   f"{exc.msg}{json_hint(text, exc.pos)}"]) from None
    except RecursionError:
        raise ConfigError(source, [TOO_DEEP]) from None
    except ValueError as exc:
        raise ConfigError(source, [_value_error(exc)]) from None


def _value_error(exc: Exception) -> str:
    if "integer string conversion" in str(exc):
        return ("holds a number of more than 4300 digits; no field accepts one "
                "(round numbers and ids have at most 19)")
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's content; ConfigMissing if absent, ConfigError if unusable or
    untrusted (filecheck)."""
    source = str(path)
    try:
        fd = open_config(path)
    except FileNotFoundError:
        raise ConfigMissing(source) from None
    except FileRefused as exc:
        raise ConfigError(source, [exc.problem]) from None
    except OSError as exc:
        raise ConfigError(source, [f"cannot access the file: {exc.strerror}"]) from None
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(source, [f"cannot read the file: {exc.strerror}"]) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(source, [f"the file is larger than {MAX_CONFIG_BYTES} bytes; "
                                   "a config is a few hundred bytes"])
    return data


def _check_text(raw: Any, source: str) -> Any:
    """JSON/YAML escapes can make a lone UTF-16 surrogate ("\\udcff"), which is no
    character: refuse it here rather than fail later on encoding it. Iterative, and
    each container once: YAML aliases can make a small file a huge tree."""
    seen: set[int] = set()
    todo = [raw]
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError as exc:
                bad = value[exc.start:exc.end].encode("unicode_escape").decode()
                raise ConfigError(source, [f'a string holds the escape "{bad}", half of a '
                                           "UTF-16 surrogate pair and no character; write the "
                                           "character itself or remove the escape"]) from None
        elif isinstance(value, (dict, list)) and id(value) not in seen:
            seen.add(id(value))
            todo.extend([*value.keys(), *value.values()] if isinstance(value, dict) else value)
    return raw


def load_bytes(data: bytes, path: str | os.PathLike) -> Config:
    source = str(path)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(source, [f"the file is larger than {MAX_CONFIG_BYTES} bytes; "
                                   "a config is a few hundred bytes"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [f"not UTF-8 text (byte {exc.start})"]) from None
    raw = parse_text(text, source, str(path).lower().endswith(YAML_SUFFIXES))
    return validate(_check_text(raw, source), source)


def load_config(path: str | os.PathLike) -> Config:
    """Reads and validates a config file."""
    return load_bytes(read_bytes(path), path)
