"""Which sessions an address may name: ``person/where`` and ``me/where``.

Theory of operation
-------------------
``where`` in ``person/where`` (or ``me/where``) names one of that person's agent sessions, or
the project one of them works in: the gate at the far end routes the message to the live
session of that name, else to one in that project (:func:`crosstalk.core.gate_routing.route`).
A name that matches neither used to be accepted and parked for a session that never comes, so
the person read it only in a session-less ``read``. :func:`check_where` refuses it before
anything is queued, with ``unknown_session`` and one sentence listing the sessions there are.

What counts as a session there: for a peer, the sessions they published to a room we share
(their live ones, as of their last publish: :mod:`crosstalk.features.presence`); for us, our
sessions heard from within the session lifetime
(:func:`~crosstalk.core.gate_routing.live_sessions`).
A project matches as routing matches it (:func:`~crosstalk.core.gate_routing.in_project`): the
whole path, or its last part, which is all a peer publishes.

Invariants: pure; the same sessions and name always give the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from crosstalk.core.gate_routing import in_project
from crosstalk.errors import UnknownSession

MAX_LISTED = 8
"""At most this many sessions are named in the refusal (the rest are counted)."""


class SessionLike(Protocol):
    """A session as an address sees it: its name and the project it works in."""

    @property
    def name(self) -> str: ...

    @property
    def project(self) -> str: ...


def matches(where: str, sessions: Sequence[SessionLike]) -> bool:
    """Whether ``where`` names one of ``sessions``, or the project one of them works in."""
    return any(s.name == where or (s.project and in_project(s.project, where)) for s in sessions)


def check_where(who: str | None, where: str, sessions: Sequence[SessionLike]) -> None:
    """Raise :class:`UnknownSession` unless ``where`` names one of ``sessions`` or its project.

    Args:
        who: how we call the person (``ben``), or None for ourselves (``me``).
        where: the part after the ``/``.
        sessions: that person's sessions (see the module docstring for which).
    """
    if matches(where, sessions):
        return
    person = "me" if who is None else who
    if not sessions:
        if who is None:
            raise UnknownSession(
                f"You have no live sessions, so me/{where} reaches nobody; send to `me/` to "
                "hold it for your next session."
            )
        raise UnknownSession(
            f"{who} has published no sessions, so {who}/{where} reaches nobody; send to `{who}` "
            "to reach whichever session is free."
        )
    listed = ", ".join(_shown(s) for s in sessions[:MAX_LISTED])
    more = f" and {len(sessions) - MAX_LISTED} more" if len(sessions) > MAX_LISTED else ""
    owner = "You have" if who is None else f"{who} has"
    theirs = "yours" if who is None else "theirs"
    raise UnknownSession(
        f"{owner} no session or project called {where!r}; {theirs}: {listed}{more}. Address "
        f"one as {person}/SESSION, or {person}/PROJECT for the session working in that project."
    )


def _shown(session: SessionLike) -> str:
    project = session.project.rstrip("/").rsplit("/", 1)[-1]
    return f"{session.name} (in {project})" if project else session.name
