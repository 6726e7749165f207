"""The one cattrs converter.

Preconfigured for JSON, with bytes carried as standard base64 strings. Structure
peer data only at the edges and call :func:`structure_remote`, which turns any cattrs validation
failure into a single :class:`~crosstalk.errors.RemoteProtocolError`.

Modules describe their special cases here at import (a tagged union, a field renamed on the
wire) and the hooks are built on first use: cattrs generates and compiles a function per class
for them, and the daemon imports every model before it serves its first op.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any, TypeVar

from cattrs.errors import BaseValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter
from cattrs.strategies import configure_tagged_union

from crosstalk.errors import RemoteProtocolError

T = TypeVar("T")

converter = make_converter()


def _b64encode(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _b64decode(value: object, _type: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError("expected a base64 string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError("invalid base64") from exc


def _strict_str(value: object, _type: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_int(value: object, _type: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_float(value: object, _type: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def _strict_bool(value: object, _type: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


converter.register_unstructure_hook(bytes, _b64encode)
converter.register_structure_hook(bytes, _b64decode)
# Peer data is never coerced: cattrs would otherwise turn 5 into "5" and "yes" into True.
converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook(float, _strict_float)
converter.register_structure_hook(bool, _strict_bool)


def rename_fields(cls: type, *, structure: bool = False, **renames: str) -> None:
    """Unstructure (and with ``structure``, structure) ``cls`` with fields renamed on the wire,
    ``rename_fields(View, from_="from")`` for a field named after a Python keyword.

    The hooks are generated the first time a ``cls`` is un/structured, not now.
    """
    fields = {name: override(rename=key) for name, key in renames.items()}
    # cattrs takes per-field overrides as **kwargs beside its own keyword options (bools), and
    # its annotations cannot say so: mypy reads a dict of overrides as those options.
    converter.register_unstructure_hook_factory(
        lambda t: t is cls,
        lambda t: make_dict_unstructure_fn(t, converter, **fields),  # type: ignore[arg-type]
    )
    if structure:
        converter.register_structure_hook_factory(
            lambda t: t is cls,
            lambda t: make_dict_structure_fn(t, converter, **fields),  # type: ignore[arg-type]
        )


class _TaggedUnion:
    """Stands in for a union's hooks until its first use, then configures it for real.

    ``configure_tagged_union`` builds the hooks of every member of the union at once (the
    relay's frames and the memory ops are three unions of 60 classes: about 150 ms of a
    daemon's start on a loaded two-core box). The first call to either placeholder configures
    the union, which replaces both placeholders in the converter, and keeps the real hooks for
    any caller that captured a placeholder (a hook generated for a class with a field of the
    union's type does).
    """

    def __init__(self, union: Any, tag_generator: Callable[[Any], str], tag_name: str) -> None:
        self._union = union
        self._tag_generator = tag_generator
        self._tag_name = tag_name
        self._hooks: tuple[Callable[[Any, Any], Any], Callable[[Any], Any]] | None = None

    def _real(self) -> tuple[Callable[[Any, Any], Any], Callable[[Any], Any]]:
        if self._hooks is None:
            configure_tagged_union(
                self._union, converter, tag_generator=self._tag_generator,
                tag_name=self._tag_name,
            )
            self._hooks = (
                converter.get_structure_hook(self._union),
                converter.get_unstructure_hook(self._union),
            )
        return self._hooks

    def structure(self, value: Any, cls: Any) -> Any:
        return self._real()[0](value, cls)

    def unstructure(self, value: Any) -> Any:
        return self._real()[1](value)


def tagged_union(union: Any, *, tag_generator: Callable[[Any], str], tag_name: str) -> None:
    """``configure_tagged_union(union, converter, ...)``, done on the union's first use."""
    lazy = _TaggedUnion(union, tag_generator, tag_name)
    converter.register_structure_hook(union, lazy.structure)
    converter.register_unstructure_hook(union, lazy.unstructure)


def structure_remote(data: Any, cls: type[T]) -> T:
    """Structure ``data`` received from a peer, or raise one RemoteProtocolError."""
    try:
        return converter.structure(data, cls)
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        name = getattr(cls, "__name__", repr(cls))  # unions have no __name__
        raise RemoteProtocolError(f"malformed {name}: {exc}") from None


def unstructure(value: Any) -> Any:
    """Turn a model into plain JSON-ready data."""
    return converter.unstructure(value)
