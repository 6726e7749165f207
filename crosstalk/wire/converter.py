"""The one cattrs converter.

Preconfigured for JSON, with bytes carried as standard base64 strings. Structure
peer data only at the edges and call :func:`structure_remote`, which turns any cattrs validation
failure into a single :class:`~crosstalk.errors.RemoteProtocolError`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, TypeVar

from cattrs.errors import BaseValidationError
from cattrs.preconf.json import make_converter

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
