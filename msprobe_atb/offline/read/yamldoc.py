"""A YAML document a user hands a command (compare's mapping file), loaded within
bounds: at most `max_bytes` of text from a regular file (datafile.py: a FIFO or
/dev/zero is refused by name), and at most `max_nodes` nodes counted as the
document unfolds, each alias counted again wherever it is used. `safe_load` alone
accepts an alias bomb (a few lines that unfold to billions of nodes) and builds it."""

from __future__ import annotations

import os
from typing import Any

from msprobe_atb.tree.datafile import read_bounded
from msprobe_atb.tree.names import text_of


class YamlRefused(ValueError):
    """The file cannot be a document of its kind; the message names it and why."""


def _unfolded(root, max_nodes: int) -> int | None:
    """The node count of the document with every alias unfolded, or None past max_nodes
    (an alias that contains itself never ends)."""
    import yaml

    count, todo = 0, [root]
    while todo:
        node = todo.pop()
        count += 1
        if count > max_nodes:
            return None
        if isinstance(node, yaml.SequenceNode):
            todo += node.value
        elif isinstance(node, yaml.MappingNode):
            todo += [n for pair in node.value for n in pair]
    return count


def load_yaml(path: str | os.PathLike, what: str, max_bytes: int, max_nodes: int) -> Any:
    """The document of the YAML file `path` (a `what`); YamlRefused naming the problem."""
    import yaml

    name = text_of(os.fsdecode(path))
    try:
        text = read_bounded(path, max_bytes, what).decode("utf-8")
    except OSError as e:
        raise YamlRefused(f"{name}: cannot read {what}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise YamlRefused(f"{name}: {what} is not UTF-8 text ({e.reason} at byte "
                          f"{e.start})") from None
    except ValueError as e:  # datafile.TooLarge
        raise YamlRefused(str(e)) from None
    loader = None
    try:
        loader = yaml.SafeLoader(text)  # its reader refuses control characters here
        root = loader.get_single_node()
        if root is not None and _unfolded(root, max_nodes) is None:
            raise YamlRefused(f"{name}: {what} unfolds (its aliases expanded) to more than "
                              f"{max_nodes} nodes; refused")
        return loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as e:
        raise YamlRefused(f"{name}: {what} is not YAML ({' '.join(str(e).split())})") from None
    except RecursionError:
        raise YamlRefused(f"{name}: {what} is nested too deep") from None
    finally:
        if loader is not None:
            loader.dispose()
