"""Editing TOML config files that belong to someone else: one marked block of our own.

Theory of operation
-------------------
The standard library reads TOML (``tomllib``) but cannot write it, and rewriting a user's file
from parsed data would lose their comments and layout. So we never rewrite: our tables live
between two comment lines, :data:`BEGIN` and :data:`END`, appended at the end of the file. To
install, strip any block of ours and append the fresh one; to uninstall, only strip. Everything
outside the markers is kept byte for byte, and an uninstall with nothing else changed since the
install gives back the file's exact bytes (:func:`crosstalk.install.base.settle`).

A client may itself append tables to the file after ours (Codex records hook trust that way), and
its writer may put them before our end marker. Stripping therefore removes only the tables whose
header is one we own (``owned_headers``); any other table found between the markers is kept.

The file must parse before we touch it, and the result must parse and hold exactly our values
(``check``); otherwise :class:`~crosstalk.errors.InvalidConfig` names the file, and nothing is
written. That catches, for example, a table of the same name the user wrote by hand.

Values are rendered by a tiny writer for the few shapes we use: strings (TOML basic strings,
escaping quotes, backslashes and control characters), integers, booleans and lists of those.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from crosstalk.errors import InvalidConfig
from crosstalk.install.base import Edit, read_text, settle

BEGIN = "# >>> crosstalk: added by `crosstalk install`; `crosstalk uninstall` removes this block"
END = "# <<< crosstalk"


def toml_string(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML rendering for {type(value).__name__}")


def toml_table(header: str, values: Mapping[str, object], *, array: bool = False) -> list[str]:
    """``[header]`` (or ``[[header]]``) and one ``key = value`` line per item."""
    head = f"[[{header}]]" if array else f"[{header}]"
    return [head, *(f"{key} = {toml_value(value)}" for key, value in values.items())]


def parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfig(
            f"{path} is not valid TOML ({exc}); fix it, then install again. It was left untouched."
        ) from None


def load_quietly(path: Path) -> dict[str, Any]:
    """The parsed file for inspection; ``{}`` if it is missing, unreadable or not TOML."""
    try:
        return parse(path, read_text(path) or "")
    except InvalidConfig:
        return {}


def strip_block(path: Path, text: str, owned_headers: Sequence[str]) -> str:
    """``text`` without our block (see the module docstring); unchanged if there is none."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    inside = False
    owned = False
    for line in lines:
        bare = line.strip()
        if not inside:
            if bare == BEGIN:
                inside, owned = True, True
                if out and not out[-1].strip():
                    out.pop()  # the blank line we put before the block
                continue
            out.append(line)
            continue
        if bare == END:
            inside = False
            continue
        if bare.startswith("["):
            owned = bare in owned_headers
        if not owned:
            out.append(line)
    if inside:
        raise InvalidConfig(
            f"{path} has crosstalk's start marker but not its end marker ({END!r}); "
            "remove the crosstalk lines by hand, then install again. It was left untouched."
        )
    return "".join(out)


def append_block(text: str, body: Sequence[str]) -> str:
    if not body:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    gap = "\n" if text.strip() else ""
    return text + gap + "\n".join([BEGIN, *body, END]) + "\n"


def toml_block_edit(
    path: Path,
    body: Sequence[str],
    *,
    check: Callable[[dict[str, Any]], bool],
    owned_headers: Sequence[str],
) -> Edit:
    """Plan replacing our block in ``path`` with ``body`` (empty body: just remove it).

    Raises:
        InvalidConfig: the file does not parse, or would not parse or would not hold our
            values (``check``) once our block is in.
    """
    before = read_text(path)
    original = before or ""
    parse(path, original)
    after = append_block(strip_block(path, original, owned_headers), body)
    try:
        doc = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        doc = None
    if doc is None or not check(doc):
        snippet = "\n".join(body) if body else "(nothing)"
        raise InvalidConfig(
            f"{path} already defines what crosstalk would add, in a way it cannot merge; "
            f"remove that, or add this by hand:\n{snippet}\nThe file was left untouched."
        )
    planned: str | None = after
    if not after.strip() and (before is None or after != before):
        planned = None
    # An uninstall that leaves the data as it was before the install gives back the backup's
    # bytes (our block may have added a final newline the file did not have).
    return Edit(path, before, settle(path, before, planned, lambda t: parse(path, t)))
