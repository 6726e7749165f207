"""The router's link-up: membership hears it first, then each feature's link-up listener, in
order, then every resumed room is woken; the router is handed these as callables and channels,
never the daemon."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
import trio.testing

from crosstalk.actors.context import ActorContext, Liveness
from crosstalk.actors.relay_link_api import LinkUp
from crosstalk.actors.router import Router, RouterInput
from crosstalk.wire import relay as w
from crosstalk.wire.relay_log import ResumedRoom


async def test_a_link_up_reaches_membership_then_the_listeners_then_the_rooms() -> None:
    """One ordered record of who heard what."""
    heard: list[str] = []

    async def wake(room: str) -> None:
        heard.append(f"wake {room}")

    async def membership(news: w.Roster | w.RoomGone | LinkUp) -> None:
        heard.append(f"membership {type(news).__name__}")

    def listener(name: str) -> Callable[[list[ResumedRoom]], Awaitable[None]]:
        async def told(rooms: list[ResumedRoom]) -> None:
            heard.append(f"{name} {[r.room for r in rooms]}")
        return told

    router = Router(wake_room=wake, membership=membership,
                    link_up=(listener("memory"), listener("other")))
    inbox_send, inbox = trio.open_memory_channel[RouterInput](8)
    ctx = ActorContext("router", inbox, Liveness(trio.current_time(), 60.0, lambda _: None))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(router.run, ctx)
        rooms = [ResumedRoom("r1", 1, 5), ResumedRoom("r2", 1, 2)]
        await inbox_send.send(LinkUp("ws://relay", b"k" * 32, rooms, []))
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert heard == [
        "membership LinkUp", "memory ['r1', 'r2']", "other ['r1', 'r2']", "wake r1", "wake r2",
    ]
