"""The inbox push's daemon side: the session keeper started with the daemon, nudged after every
commit and every local arrival (it has no control ops: the hook and the gate meet its actors
through the ``notices`` table)."""

from __future__ import annotations

from typing import Protocol

import trio

from crosstalk.actors.fanout import coalescing
from crosstalk.core.room import Applied
from crosstalk.features.caps import Stored, Supervises
from crosstalk.features.feature import Plugs
from crosstalk.features.inbox.actor import Nudge, SessionActor, SessionKeeper, nudge


class Host(Stored, Supervises, Protocol):
    """What the inbox push uses: the store it reads notices from, and actors per session."""


def plug(daemon: Host) -> Plugs:
    """Start the session keeper with the daemon and nudge it after every commit."""
    keeper: list[trio.MemorySendChannel[Nudge]] = []

    async def start_session(name: str) -> trio.MemorySendChannel[Nudge]:
        actor = SessionActor(name, daemon.store)
        return await daemon.supervisor.start_actor(f"session-{name}", actor, inbox_size=1)

    async def stop_session(name: str) -> None:
        await daemon.supervisor.stop_actor(f"session-{name}")

    async def start() -> None:
        actor = SessionKeeper(daemon.store, start=start_session, stop=stop_session)
        keeper.append(await daemon.supervisor.start_actor("inbox", actor, inbox_size=1))

    async def nudged() -> None:
        if keeper:
            nudge(keeper[0])

    async def on_local(applied: list[Applied]) -> None:
        await nudged()

    return Plugs(
        # The actors re-read the notices table when nudged: a coalescing subscriber.
        applied_subscribers=(coalescing("inbox", nudged),),
        local_listeners=(on_local,),
        start=(start,),
    )
