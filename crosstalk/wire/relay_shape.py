"""The strict shape check relay frames pass before the converter sees them.

The shared converter coerces (``int("7")``, ``str({...})``); peer data must instead match its
declared JSON type exactly, so a mistyped field is ``bad_frame`` rather than a silent guess.
:func:`check_fields` walks a decoded JSON object against an attrs class's resolved field types
(bytes travel as base64 text; whether that text decodes is left to the converter).
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from crosstalk.errors import RemoteProtocolError


def _check(value: Any, tp: Any, where: str) -> None:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for option in get_args(tp):
            try:
                _check(value, option, where)
                return
            except RemoteProtocolError:
                continue
        raise RemoteProtocolError(f"{where} has the wrong type", hint="bad_frame")
    if origin is Literal:
        ok = value in get_args(tp)
    elif origin is list:
        ok = isinstance(value, list)
        if ok:
            for i, item in enumerate(value):
                _check(item, get_args(tp)[0], f"{where}[{i}]")
    elif origin is dict:
        ok = isinstance(value, dict)
        if ok:
            for key, item in value.items():
                _check(key, str, f"{where} key")
                _check(item, get_args(tp)[1], f"{where}.{key}")
    elif tp is type(None):
        ok = value is None
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp in (str, bytes):
        ok = isinstance(value, str)
    elif attrs.has(tp):
        ok = isinstance(value, dict)
        if ok:
            check_fields(value, tp, where)
    else:  # pragma: no cover - a model used a type this checker does not know
        raise TypeError(f"unsupported field type {tp!r}")
    if not ok:
        raise RemoteProtocolError(f"{where} has the wrong type", hint="bad_frame")


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """Each field's resolved type, and whether it has a default (resolving string annotations
    is slow; do it once)."""
    hints = typing.get_type_hints(cls)
    return tuple((field.name, hints[field.name], field.default is not attrs.NOTHING)
                 for field in attrs.fields(cls))


def check_fields(data: dict[str, Any], cls: type, where: str) -> None:
    """Check that ``data`` has every field of attrs class ``cls``, each of its exact JSON type.

    Args:
        data: one decoded JSON object (extra keys are ignored; a field with a default may be
            absent, since it was added later and an older peer does not send it).
        cls: the attrs model it should structure into.
        where: how error messages name the object (the frame's ``t``, then the field path).

    Raises:
        RemoteProtocolError: a field is missing or mistyped; ``hint`` is ``bad_frame``.
    """
    for name, tp, optional in _field_types(cls):
        if name not in data:
            if optional:  # added to the protocol later: an older peer omits it
                continue
            raise RemoteProtocolError(f"{where} lacks {name!r}", hint="bad_frame")
        _check(data[name], tp, f"{where}.{name}")
