"""Editing YAML config files (Hermes, Goose) as data.

Both clients rewrite their own ``config.yaml`` from parsed data (``goose configure``,
``hermes config set``), so comments in these files do not survive the clients themselves; we
edit the same way: parse with ``yaml.safe_load``, change the mapping, dump it back in block
style with the keys in their original order. A file whose data does not change is not
rewritten, and the backup beside a changed file keeps its exact former text.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from crosstalk.errors import InvalidConfig
from crosstalk.install.base import Edit, read_text

YamlMapping = dict[str, Any]


def parse_mapping(path: Path, text: str | None) -> YamlMapping:
    """The file's top-level mapping; a missing or empty file is ``{}``.

    Raises:
        InvalidConfig: not YAML, or not a mapping at the top.
    """
    if text is None or not text.strip():
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise InvalidConfig(
            f"{path} is not valid YAML ({problem}); fix it, then install again. "
            "It was left untouched."
        ) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path} does not hold a YAML mapping; it was left untouched.")
    return value


def dump(data: YamlMapping) -> str:
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return text


def yaml_edit(path: Path, change: Callable[[YamlMapping], None]) -> Edit:
    """Plan an edit of one YAML file: ``change`` mutates a copy of its mapping."""
    before = read_text(path)
    data = parse_mapping(path, before)
    new = copy.deepcopy(data)
    change(new)
    if new == data:
        return Edit(path, before, before)
    if not new:
        return Edit(path, before, None)
    return Edit(path, before, dump(new))


def child_mapping(path: Path, data: YamlMapping, key: str) -> YamlMapping:
    """``data[key]``, created empty if absent or null.

    Raises:
        InvalidConfig: it is there but not a mapping.
    """
    value = data.get(key)
    if value is None:
        value = data[key] = {}
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path}: `{key}` is not a mapping, so crosstalk will not edit it.")
    return value


def load_quietly(path: Path) -> YamlMapping:
    try:
        return parse_mapping(path, read_text(path))
    except InvalidConfig:
        return {}
