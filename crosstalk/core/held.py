"""Held until idle: turning waiting messages into one notice per sender.

Theory of operation
-------------------
Triage holds three kinds of decision (:attr:`Decision.holds`):

* ``NOTICE_WHEN_IDLE`` / ``DELIVER_WHEN_IDLE``: an ``fyi`` that arrived while the session was
  busy. It surfaces when the session is idle.
* ``HOLD_QUIET``: it arrived during a timed mute. It surfaces once no mute covers it any more,
  and then like any arrival: an ``fyi`` still waits for idle, a ``question`` lands at once.

:func:`surface_held` is called by the session shell whenever something could release items:
the session went idle, or a mute ended (:func:`next_release` says when to look again). It
splits the held items into those released now and those still held, and groups the released
ones into one :class:`HeldBatch` per sender, so a sender who left five ``fyi`` lines costs one
notice, not five. Batches are ordered by their first item's time, items within a batch by time.

A batch names the sender (and their sessions) only: the notice carries no peer words. Each
item keeps its ``words`` flag (decided at arrival from the level); only those items' words may
be quoted into the turn.

Items are released once: the shell removes released items from its held set (or marks them
surfaced) and records the surfacing in the attention record.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from crosstalk.core.mute import MuteState
from crosstalk.core.triage import Decision, Intent, SessionStatus


@attrs.frozen
class HeldItem:
    """One message waiting for the session.

    Attributes:
        item: the message id.
        sender: the sender's person key.
        label: the sender's name to show.
        session: the sender's session name, if they sent from one.
        room: the relay room it arrived in (None for a local post).
        ts: when it arrived.
        intent: the sender's declared intent.
        decision: the hold decision triage gave it.
        words: its words may enter the turn when it surfaces (the level was ``deliver``).
    """

    item: str
    sender: str
    label: str
    session: str | None
    room: str | None
    ts: float
    intent: Intent
    decision: Decision
    words: bool = False


@attrs.frozen
class HeldBatch:
    """One notice's worth: everything released from one sender.

    Attributes:
        sender: the sender's person key.
        label: the sender's name to show.
        sessions: their distinct session names, in order of first appearance.
        items: the released items, oldest first.
    """

    sender: str
    label: str
    sessions: tuple[str, ...]
    items: tuple[HeldItem, ...]


@attrs.frozen
class Surfacing:
    """The outcome of :func:`surface_held`."""

    batches: tuple[HeldBatch, ...]
    still_held: tuple[HeldItem, ...]


def _released(item: HeldItem, status: SessionStatus, mutes: MuteState, now: float) -> bool:
    idle = status is SessionStatus.IDLE
    if item.decision is Decision.HOLD_QUIET:
        if mutes.covers(item.sender, item.room, now):
            return False
        return idle or item.intent is not Intent.FYI
    return idle


def surface_held(
    held: Iterable[HeldItem], status: SessionStatus, mutes: MuteState, now: float
) -> Surfacing:
    """Release what can surface now, as one batch per sender.

    Args:
        held: the session's held items.
        status: the session's status now (unknown counts as busy).
        mutes: the current timed mutes.
        now: the current time on the mutes' clock.
    """
    released: list[HeldItem] = []
    kept: list[HeldItem] = []
    for item in held:
        (released if _released(item, status, mutes, now) else kept).append(item)
    by_sender: dict[str, list[HeldItem]] = {}
    for item in sorted(released, key=lambda it: it.ts):
        by_sender.setdefault(item.sender, []).append(item)
    batches = tuple(_batch(items) for items in by_sender.values())
    return Surfacing(batches=batches, still_held=tuple(kept))


def _batch(items: list[HeldItem]) -> HeldBatch:
    sessions = tuple(dict.fromkeys(it.session for it in items if it.session is not None))
    first = items[0]
    return HeldBatch(sender=first.sender, label=first.label, sessions=sessions, items=tuple(items))


def next_release(held: Iterable[HeldItem], mutes: MuteState, now: float) -> float | None:
    """The earliest time a mute holding one of ``held`` ends, or None if no mute holds any."""
    quiet = ((it.sender, it.room) for it in held if it.decision is Decision.HOLD_QUIET)
    return next_release_of(quiet, mutes, now)


def next_release_of(
    sources: Iterable[tuple[str, str | None]], mutes: MuteState, now: float
) -> float | None:
    """:func:`next_release` given only the ``(sender, room)`` of the quiet holds."""
    ends = [
        end for sender, room in sources if (end := mutes.ends_at(sender, room, now)) is not None
    ]
    return min(ends) if ends else None
