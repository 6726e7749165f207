"""Editing JSON config files: parse strictly, splice our entries in, keep everyone else's.

Two hook layouts occur. Claude Code, Codex, Qwen Code, Gemini CLI and Goose plugins nest
handlers in groups: ``{"hooks": {Event: [{"hooks": [handler, ...]}, ...]}}``. Cursor keeps a flat
list: ``{"hooks": {event: [handler, ...]}}``. Both are spliced by :func:`splice_hooks`: on every
event, each item holding one of our handlers loses them, and our new items take the place of the
first such item (so a reinstall keeps positions, which matters for Codex trust records keyed by
group index); events with none of ours get ours appended. Items that held only ours disappear;
items that also held others' handlers stay with the others' handlers. Uninstalling is the same
splice with nothing of ours to put back, followed by pruning the containers it emptied.

A changed file is written back in its own style (:class:`Style`: indentation, separators, line
ending, final newline), with its keys in their order; see :func:`crosstalk.install.base.settle`
for how uninstall gives back the exact bytes. A key that appears twice in one object is refused
(``invalid_config``): rewriting would silently keep only the last one.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import cast

import attrs

from crosstalk.errors import InvalidConfig
from crosstalk.install.base import (
    Edit,
    is_ours,
    keep_emptied,
    previous_text,
    read_text,
    settle,
)

JsonObject = dict[str, object]


def parse_object(path: Path, text: str | None) -> JsonObject:
    """The file's top-level object; a missing or blank file is ``{}``.

    Raises:
        InvalidConfig: not JSON, or not an object at the top.
    """
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as dup:
        raise InvalidConfig(
            f"{path} has the key `{dup.key}` twice in one object, so crosstalk will not edit it "
            "(rewriting it would keep only one of them); it was left untouched."
        ) from None
    except (ValueError, RecursionError) as exc:
        raise InvalidConfig(
            f"{path} is not valid JSON ({exc}); fix it, then install again. It was left untouched."
        ) from None
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path} does not hold a JSON object; it was left untouched.")
    return value


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, object]]) -> JsonObject:
    out: JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


@attrs.frozen
class Style:
    """How a JSON file is laid out, so a rewrite looks like the file it replaces."""

    #: None: all on one line; else the indentation of one level ("" when levels are not indented).
    indent: str | None = "  "
    colon: str = ": "
    comma: str = ", "
    newline: str = "\n"
    final_newline: bool = True
    ascii_only: bool = False

    @classmethod
    def of(cls, text: str | None) -> Style:
        """The style of ``text``; two-space indentation for a new or blank file."""
        if text is None or not text.strip():
            return cls()
        newline = "\r\n" if "\r\n" in text else "\n"
        body = text.strip()
        final = text.endswith(("\n", "\r"))
        ascii_only = text.isascii() and _WIDE_ESCAPE.search(text) is not None
        colon = _COLON.search(body)
        colon_text = colon.group(1) if colon else ": "
        if "\n" not in body:
            comma = ", " if ", " in body or colon_text.endswith(" ") else ","
            return cls(None, colon_text, comma, newline, final, ascii_only)
        lines = body.splitlines()
        indent = "  "
        for line in lines[1:]:
            if line.strip():
                indent = line[: len(line) - len(line.lstrip())]
                break
        return cls(indent, colon_text, ",", newline, final, ascii_only)

    def dump(self, data: JsonObject) -> str:
        indent: str | None = self.indent
        if indent is not None and not data:
            indent = None
        separators = (self.comma if indent is None else ",", self.colon)
        text = json.dumps(
            data, indent=indent, separators=separators, ensure_ascii=self.ascii_only
        )
        if self.newline != "\n":
            text = text.replace("\n", self.newline)
        return text + (self.newline if self.final_newline else "")


#: A ``\\uXXXX`` escape json writes only when asked for ASCII (controls are escaped anyway).
_WIDE_ESCAPE = re.compile(r"\\u(?!00[01][0-9a-fA-F])[0-9a-fA-F]{4}")
#: The text between the first key and its value (``": "``, ``":"``, ``" : "``).
_COLON = re.compile(r'^\{\s*"(?:[^"\\]|\\.)*"(\s*:\s*)')


def dump(data: JsonObject, style: Style | None = None) -> str:
    return (style or Style()).dump(data)


def json_edit(path: Path, change: Callable[[JsonObject], None]) -> Edit:
    """Plan an edit of one JSON file: ``change`` mutates a copy of its object.

    Unchanged data leaves the text alone (the user's formatting survives a no-op install). A file
    the change leaves empty is removed (or not created): an empty object holds nobody's entries.
    A changed file keeps its style (:class:`Style`), and a top-level section the user had empty
    stays (:func:`~crosstalk.install.base.keep_emptied`).
    """
    before = read_text(path)
    data = parse_object(path, before)
    new = copy.deepcopy(data)
    change(new)
    if new == data:
        return Edit(path, before, before)
    keep_emptied(data, new, None if before is None else _earlier(path))
    # Emptied (or never needed): nothing in it is anyone's, so it goes.
    after = Style.of(before).dump(new) if new else None
    return Edit(path, before, settle(path, before, after, lambda t: parse_object(path, t)))


def _earlier(path: Path) -> JsonObject | None:
    """The parsed backup (what the file held before our latest change), if it parses."""
    try:
        return parse_object(path, previous_text(path))
    except InvalidConfig:
        return None


def child_object(path: Path, data: JsonObject, key: str) -> JsonObject:
    """``data[key]``, created empty if absent.

    Raises:
        InvalidConfig: it is there but not an object.
    """
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path}: `{key}` is not an object, so crosstalk will not edit it.")
    return cast(JsonObject, value)


def prune(data: JsonObject, key: str) -> None:
    """Drop ``data[key]`` when it is an empty object or list."""
    if data.get(key) in ({}, []):
        del data[key]


def _grouped_ours(item: object, client: str) -> tuple[bool, object | None]:
    """For a group item: (held any of ours, the group without ours or None if nothing is left)."""
    if not isinstance(item, dict) or not isinstance(item.get("hooks"), list):
        return False, item
    handlers = item["hooks"]
    rest = [h for h in handlers if not (isinstance(h, dict) and is_ours(h.get("command"), client))]
    if len(rest) == len(handlers):
        return False, item
    return True, ({**item, "hooks": rest} if rest else None)


def _flat_ours(item: object, client: str) -> tuple[bool, object | None]:
    if isinstance(item, dict) and is_ours(item.get("command"), client):
        return True, None
    return False, item


def _splice_list(
    items: list[object], ours: list[object], client: str, grouped: bool
) -> list[object]:
    split = _grouped_ours if grouped else _flat_ours
    out: list[object] = []
    placed = False
    for item in items:
        held, rest = split(item, client)
        if held and not placed:
            out.extend(ours)
            placed = True
        if rest is not None:
            out.append(rest)
    if not placed:
        out.extend(ours)
    return out


def splice_hooks(
    path: Path,
    section: JsonObject,
    ours: JsonObject,
    client: str,
    *,
    grouped: bool = True,
) -> None:
    """Replace our handlers in ``section`` (event -> list) with ``ours`` (same shape).

    ``ours`` empty removes every handler of ``client``; events left empty are dropped.
    """
    for event in list(dict.fromkeys([*section, *ours])):
        current = section.get(event, [])
        if not isinstance(current, list):
            raise InvalidConfig(
                f"{path}: hooks for `{event}` are not a list, so crosstalk will not edit them."
            )
        wanted = ours.get(event, [])
        new = _splice_list(current, list(cast(list[object], wanted)), client, grouped)
        if not new:
            section.pop(event, None)
        elif event not in section:
            section[event] = new
        elif new != current:
            current[:] = new  # in place: a YAML list keeps its comments and style


def our_commands(section: object, client: str, *, grouped: bool = True) -> dict[str, list[str]]:
    """Event -> our hook command lines found in a hooks section (for doctor)."""
    found: dict[str, list[str]] = {}
    if not isinstance(section, dict):
        return found
    for event, items in section.items():
        if not isinstance(items, list):
            continue
        handlers: list[object] = []
        for item in items:
            if grouped and isinstance(item, dict) and isinstance(item.get("hooks"), list):
                handlers.extend(item["hooks"])
            elif not grouped:
                handlers.append(item)
        for handler in handlers:
            if isinstance(handler, dict) and is_ours(handler.get("command"), client):
                found.setdefault(str(event), []).append(str(handler["command"]))
    return found


def load_quietly(path: Path) -> JsonObject:
    """The file's object for inspection; ``{}`` if it is missing or does not parse."""
    try:
        return parse_object(path, read_text(path))
    except InvalidConfig:
        return {}
