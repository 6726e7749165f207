"""The inbox push's daemon side: the session keeper started with the daemon, nudged after every
commit and every local arrival (it has no control ops: the hook and the gate meet its actors
through the ``notices`` table)."""

from __future__ import annotations

import functools
from typing import Protocol

import trio

from crosstalk.actors.children import ChildSpec, DynamicKind, Mailbox
from crosstalk.actors.fanout import coalescing
from crosstalk.features.caps import Stored, Supervises
from crosstalk.features.feature import Plugs
from crosstalk.features.inbox.actor import Nudge, SessionActor, SessionKeeper, nudge

SESSIONS = DynamicKind(
    "session-<name>", "the inbox actor (features/inbox), one per live session with an inbox socket"
)


class Host(Stored, Supervises, Protocol):
    """What the inbox push uses: the store it reads notices from, and actors per session."""


async def start_session(daemon: Host, name: str) -> trio.MemorySendChannel[Nudge]:
    """Start the session actor of ``name`` (sessions spawning into the daemon: STYLE rule 9)."""
    actor = SessionActor(name, daemon.store)
    return await daemon.supervisor.start_actor(SESSIONS.instance(name), actor, inbox_size=1)


async def stop_session(daemon: Supervises, name: str) -> None:
    """Stop the session actor of ``name`` (its session ended or expired)."""
    await daemon.supervisor.stop_actor(SESSIONS.instance(name))


async def nudged(keeper: trio.MemorySendChannel[Nudge], *_: object) -> None:
    """Subscriber and local listener: the actors re-read the notices table when nudged."""
    nudge(keeper)


def plug(daemon: Host) -> Plugs:
    """Declare the session keeper and nudge it after every commit and local arrival."""
    keeper = Mailbox[Nudge](1)
    make = functools.partial(
        SessionKeeper, daemon.store, start=functools.partial(start_session, daemon),
        stop=functools.partial(stop_session, daemon),
    )
    return Plugs(
        # The actors re-read the notices table when nudged: a coalescing subscriber.
        applied_subscribers=(coalescing("inbox", functools.partial(nudged, keeper.send)),),
        local_listeners=(functools.partial(nudged, keeper.send),),
        children=(ChildSpec("inbox", make, keeper),),
        spawns=(SESSIONS,),
    )
