"""Editing JSON config files: parse strictly, splice our entries in, keep everyone else's.

Two hook layouts occur. Claude Code, Codex, Qwen Code, Gemini CLI and Goose plugins nest
handlers in groups: ``{"hooks": {Event: [{"hooks": [handler, ...]}, ...]}}``. Cursor keeps a flat
list: ``{"hooks": {event: [handler, ...]}}``. Both are spliced by :func:`splice_hooks`: on every
event, each item holding one of our handlers loses them, and our new items take the place of the
first such item (so a reinstall keeps positions, which matters for Codex trust records keyed by
group index); events with none of ours get ours appended. Items that held only ours disappear;
items that also held others' handlers stay with the others' handlers. Uninstalling is the same
splice with nothing of ours to put back, followed by pruning the containers it emptied.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

from crosstalk.errors import InvalidConfig
from crosstalk.install.base import Edit, is_ours, read_text

JsonObject = dict[str, object]


def parse_object(path: Path, text: str | None) -> JsonObject:
    """The file's top-level object; a missing or blank file is ``{}``.

    Raises:
        InvalidConfig: not JSON, or not an object at the top.
    """
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidConfig(
            f"{path} is not valid JSON ({exc}); fix it, then install again. It was left untouched."
        ) from None
    if not isinstance(value, dict):
        raise InvalidConfig(f"{path} does not hold a JSON object; it was left untouched.")
    return value


def dump(data: JsonObject) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def json_edit(path: Path, change: Callable[[JsonObject], None]) -> Edit:
    """Plan an edit of one JSON file: ``change`` mutates a copy of its object.

    Unchanged data leaves the text alone (the user's formatting survives a no-op install). A file
    the change leaves empty is removed (or not created): an empty object holds nobody's entries.
    """
    before = read_text(path)
    data = parse_object(path, before)
    new = copy.deepcopy(data)
    change(new)
    if new == data:
        return Edit(path, before, before)
    if not new:
        # Emptied (or never needed): nothing in it is anyone's, so it goes.
        return Edit(path, before, None)
    return Edit(path, before, dump(new))


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
        if new:
            section[event] = new
        elif event in section:
            del section[event]


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
