"""The attention gate: decides what reaches which session, and when.

Theory of operation
-------------------
The gate is pure policy, split by concern:

* :mod:`crosstalk.core.levels`    the trust dial and level resolution (precedence and caps);
* :mod:`crosstalk.core.triage`    the decision table (level x intent x kind x status x muted);
* :mod:`crosstalk.core.mute`      timed mutes (hold, not drop);
* :mod:`crosstalk.core.held`      held items released as one notice per sender batch;
* :mod:`crosstalk.core.ration`    the per-recipient ration of self-initiated sends;
* :mod:`crosstalk.core.attention` the attention record and its bar chart.

This module composes the first three for one arrival. The gate actor builds an :class:`Arrival`
from what the daemon itself knows: the sender's verified identity and contact facts, and the
relay room the op arrived in (the relay's envelope, never a field inside the sealed payload).
It calls :func:`decide` with the current settings, mutes, session status and ``now``, and acts
on the :class:`Verdict`: drop it, send the ``refused`` auto-reply, record a memory write, hold
it, or hand it to the session as a notice or as quoted words.

Invariants: the same inputs always give the same verdict; nothing here reads a clock, a file
or a socket; a sender can influence only ``intent`` and ``kind``, and neither can raise the
level (so neither can put words in the turn).
"""

from __future__ import annotations

import attrs

from crosstalk.core.levels import Resolution, Source, TrustSettings, resolve_level
from crosstalk.core.mute import MuteState
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus, triage


@attrs.frozen
class Arrival:
    """One op for a session, as the daemon knows it.

    Attributes:
        source: the verified sender and what we know about them.
        room: the relay room the op arrived in (None for a local post).
        intent: the sender's declared intent.
        kind: what the op carries.
    """

    source: Source
    room: str | None
    intent: Intent
    kind: Kind


@attrs.frozen
class Verdict:
    """The gate's answer for one arrival.

    Attributes:
        decision: what to do with it.
        resolution: the level that applied and why.
        muted: a timed mute covered the source.
    """

    decision: Decision
    resolution: Resolution
    muted: bool


def decide(
    settings: TrustSettings,
    mutes: MuteState,
    arrival: Arrival,
    status: SessionStatus,
    now: float,
) -> Verdict:
    """Resolve the source's level, check the mutes, and triage one arrival.

    Args:
        settings: the receiver's trust settings.
        mutes: the receiver's timed mutes.
        arrival: the op and its verified facts.
        status: the receiving session's status (unknown counts as busy).
        now: the current time on the mutes' clock.

    Raises:
        LocalProtocolError: a local post was given a room.
    """
    resolution = resolve_level(settings, arrival.source, arrival.room)
    muted = mutes.covers(arrival.source.person, arrival.room, now)
    decision = triage(resolution.level, arrival.intent, arrival.kind, status, muted)
    return Verdict(decision=decision, resolution=resolution, muted=muted)
