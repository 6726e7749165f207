"""What one control op is, as data: :class:`OpSpec`. The table of them is :mod:`.table`.

A spec names the op, the attrs model its parameters structure into, the attrs model of each
reply record, the errors it may fail with, whether it streams, and one line saying what it does.
The daemon dispatches by it (:mod:`crosstalk.actors.control`), and the docs and the MCP tools
are written from it; nothing here runs an op.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import attrs

from crosstalk.errors import (
    CrosstalkError,
    DaemonStarting,
    DamagedState,
    InvalidRequest,
    NotSetUp,
    RemoteProtocolError,
    StorageFull,
)

COMMON_ERRORS: tuple[type[CrosstalkError], ...] = (
    CrosstalkError,  # ``internal``: a bug, or a part of the daemon that did not answer
    InvalidRequest,  # the request line was not one
    RemoteProtocolError,  # the params did not fit the op's model
    NotSetUp,  # no identity yet (any op reading our keys)
    DamagedState,  # a state file that does not parse
    StorageFull,  # the disk refused a write
    DaemonStarting,  # the daemon did not finish starting in time
)
"""What any op may fail with, besides its own errors."""

P = TypeVar("P")


@attrs.frozen
class OpSpec(Generic[P]):
    """One control op.

    Attributes:
        name: what a request's ``op`` says.
        params: the attrs model the request's other fields structure into.
        errors: the errors this op may raise, besides :data:`COMMON_ERRORS`.
        doc: one line for the docs and the tools.
        reply: the attrs model of its reply, or the models it may be: a stream's records in
            the order they come, or ``status``, which the control gate answers while the
            daemon starts.
        stream: the op answers with a stream of records, not one.
    """

    name: str
    params: type[P]
    errors: tuple[type[CrosstalkError], ...]
    doc: str
    reply: type[Any] | tuple[type[Any], ...]
    stream: bool = False

    def replies(self) -> tuple[type[Any], ...]:
        """The models a reply record of this op may be."""
        return self.reply if isinstance(self.reply, tuple) else (self.reply,)

    def codes(self) -> frozenset[str]:
        """Every error code this op may answer with (its own and the common ones)."""
        return frozenset(e.code for e in (*self.errors, *COMMON_ERRORS))

    def declares(self, error: CrosstalkError) -> bool:
        """Whether ``error`` is one this op says it may raise (by its stable code)."""
        return error.code in self.codes()
