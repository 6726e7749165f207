"""Editing YAML config files (Hermes, Goose) in place, round-trip.

The file is loaded with ruamel.yaml's round-trip loader, which keeps comments, anchors, aliases,
merge keys, quoting and key order; ``change`` edits that document and it is dumped back with the
file's own indentation (:func:`_indents`). Only what we add or remove changes. A file whose data
does not change is not rewritten, and :func:`crosstalk.install.base.settle` gives back the exact
bytes of the backup on an uninstall that leaves the data as it was before the install.

Planning loads the text twice (one copy to change, one to compare against) rather than
deep-copying: a deep copy of a round-trip document expands its merge keys.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from crosstalk.errors import InvalidConfig
from crosstalk.install.base import Edit, keep_emptied, previous_text, read_text, settle

YamlMapping = Any  # a ruamel CommentedMap, or a plain dict for a new file

_KEY_LINE = re.compile(r"^( *)[^\s#-][^:#]*:\s*(?:#.*)?$")
_ITEM_LINE = re.compile(r"^( *)- ")


def _indents(text: str) -> tuple[int, int]:
    """(mapping indent, offset of a block sequence's dash under its key), guessed from ``text``.

    The first key line followed by a deeper line gives the mapping indent (or the offset, when
    the deeper line is a ``- `` item). Defaults: two, and dashes flush with the key (PyYAML's
    and the clients' own style).
    """
    mapping: int | None = None
    offset: int | None = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for line, following in itertools.pairwise(lines):
        key = _KEY_LINE.match(line)
        if key is None:
            continue
        base = len(key.group(1))
        item = _ITEM_LINE.match(following)
        deeper = len(following) - len(following.lstrip(" "))
        if item is not None and offset is None and deeper >= base:
            offset = deeper - base
        elif item is None and mapping is None and deeper > base:
            mapping = deeper - base
        if mapping is not None and offset is not None:
            break
    return mapping or 2, offset or 0


def _yaml(text: str) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a long line of the user's
    mapping, offset = _indents(text)
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)
    return yaml


def parse_mapping(path: Path, text: str | None) -> YamlMapping:
    """The file's top-level mapping (a round-trip document); a missing or empty file is ``{}``.

    Raises:
        InvalidConfig: not YAML (a duplicate key included), or not a mapping at the top.
    """
    if text is None or not text.strip():
        return CommentedMap()
    try:
        value = _yaml(text).load(text)
    except YAMLError as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else "parse error"
        raise InvalidConfig(
            f"{path} is not valid YAML ({problem}); fix it, then install again. "
            "It was left untouched."
        ) from None
    if value is None:
        return CommentedMap()
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path} does not hold a YAML mapping; it was left untouched.")
    return value


def dump(data: YamlMapping, like: str | None = None) -> str:
    """``data`` as YAML, indented as ``like`` is."""
    out = io.StringIO()
    _yaml(like or "").dump(data, out)
    return out.getvalue()


def yaml_edit(path: Path, change: Callable[[YamlMapping], None]) -> Edit:
    """Plan an edit of one YAML file: ``change`` mutates a fresh load of its document."""
    before = read_text(path)
    data = parse_mapping(path, before)
    new = parse_mapping(path, before)
    change(new)
    if new == data:
        return Edit(path, before, before)
    earlier = None
    if before is not None:
        try:
            earlier = parse_mapping(path, previous_text(path))
        except InvalidConfig:
            earlier = None
    keep_emptied(data, new, earlier)
    after = dump(new, before) if new else None
    return Edit(path, before, settle(path, before, after, lambda t: parse_mapping(path, t)))


def child_mapping(path: Path, data: YamlMapping, key: str) -> YamlMapping:
    """``data[key]``, created empty if absent or null.

    Raises:
        InvalidConfig: it is there but not a mapping.
    """
    value = data.get(key)
    if value is None:
        value = data[key] = CommentedMap()
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path}: `{key}` is not a mapping, so crosstalk will not edit it.")
    return value


def load_quietly(path: Path) -> YamlMapping:
    try:
        return parse_mapping(path, read_text(path))
    except InvalidConfig:
        return {}
