"""Frozen value classes without the ``dataclasses`` module, for the hook program's import path.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``): about 15 ms of
a hook that should cost no more than a bare interpreter. A :class:`Frozen` subclass lists its
fields in ``__slots__`` and sets them in its own typed ``__init__`` with
:meth:`Frozen._init`; it then compares, hashes and prints by those fields, refuses assignment,
and :meth:`Frozen.replace` copies it with some fields changed. Standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self


class FrozenError(AttributeError):
    """An assignment to a field of a :class:`Frozen` instance."""


class Frozen:
    """Base of an immutable record whose fields are its class's ``__slots__``."""

    __slots__: tuple[str, ...] = ()

    def _init(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in type(self).__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenError(f"{type(self).__name__} is frozen: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise FrozenError(f"{type(self).__name__} is frozen: cannot delete {name}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Frozen)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self).__slots__)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (an unknown field name raises TypeError)."""
        names = type(self).__slots__
        unknown = set(changes) - set(names)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(type(self))
        for name in names:
            object.__setattr__(copy, name, changes.get(name, getattr(self, name)))
        return copy
