"""What this daemon tells its roommates about its agent sessions, and when.

Theory of operation
-------------------
The presence actor looks at the local sessions table every :data:`CHECK_EVERY` seconds (a
shell concern; this module is pure) and asks :class:`Publisher` what to post. A
:class:`~crosstalk.wire.room_ops.SessionsPublished` carries every live session at once (name,
the project's bare directory name, never its path, status, and last seen), so the receiver
simply replaces what it had from us in that room.

:meth:`Publisher.due` returns the rooms that need the current list: a joined room that never had
it, one whose last list differs in anything but ``last_seen``, or one last told more than
:data:`REFRESH` seconds ago (so ``last seen`` stays honest for a session that is quietly busy).
A hook refreshing ``last_seen`` on every event therefore costs no op. :meth:`Publisher.posted`
records what a room was told; a failed post is simply due again at the next check. Memory only:
after a restart every room is told once more.

Invariants: only live sessions (heard from within the gate's session lifetime) are published;
at most :data:`MAX_SESSIONS`, most recently seen first; strings are cut to :data:`MAX_NAME`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Protocol

import attrs

from crosstalk.core.gate_routing import live_sessions
from crosstalk.core.triage import SessionStatus
from crosstalk.wire.room_ops import MAX_NAME, MAX_SESSIONS, PublishedSession, SessionsPublished

CHECK_EVERY = 1.0
REFRESH = 300.0


class LocalSession(Protocol):
    """What the publisher reads of a local session (``crosstalk.store.sessions.Session``)."""

    @property
    def name(self) -> str: ...

    @property
    def project(self) -> str: ...

    @property
    def status(self) -> SessionStatus: ...

    @property
    def last_seen(self) -> float: ...


def published(sessions: Iterable[LocalSession], now: float) -> SessionsPublished:
    """The op that tells roommates about the live ``sessions``."""
    live = live_sessions(list(sessions), now)[:MAX_SESSIONS]
    return SessionsPublished(
        tuple(
            PublishedSession(
                s.name[:MAX_NAME],
                PurePath(s.project).name[:MAX_NAME] if s.project else "",
                s.status.value,
                round(s.last_seen, 3),
            )
            for s in live
        )
    )


def _shape(op: SessionsPublished) -> tuple[tuple[str, str, str], ...]:
    return tuple((s.name, s.project, s.status) for s in op.sessions)


@attrs.define
class _Told:
    shape: tuple[tuple[str, str, str], ...]
    at: float


@attrs.define
class Publisher:
    """Which rooms were told what, and when (see the module docstring)."""

    _told: dict[str, _Told] = attrs.Factory(dict)

    def due(self, rooms: Sequence[str], op: SessionsPublished, now: float) -> list[str]:
        """The rooms among ``rooms`` that should be sent ``op`` now."""
        shape = _shape(op)
        return [
            room for room in rooms
            if (told := self._told.get(room)) is None
            or told.shape != shape
            or now - told.at >= REFRESH
        ]

    def posted(self, room: str, op: SessionsPublished, now: float) -> None:
        """``room`` was sent ``op`` at ``now``."""
        self._told[room] = _Told(_shape(op), now)

    def forget_others(self, rooms: Sequence[str]) -> None:
        """Drop rooms we are no longer in (joining again tells them afresh)."""
        for room in set(self._told) - set(rooms):
            del self._told[room]
