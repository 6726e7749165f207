"""The router: where everything the relay link reports goes next.

Its inbox is the link's ``events`` channel (plus a few registration commands): committed inbound
ops of a room whose actor is not running start and wake it (the link rings a running room's
doorbell itself), pairing-slot pushes go to the pairing actor that registered the
slot, invitations wake whoever waits for them, presence is remembered, and ``sent`` outcomes
wake whoever waits on that op. It holds no durable state: after a restart it wakes every room
(``LinkUp``), and each room catches up from the store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import attrs
import trio

from crosstalk import sim_hooks
from crosstalk.actors.context import ActorContext
from crosstalk.actors.pairing import PairingInput, Reattach
from crosstalk.actors.relay_link import (
    InboundOp,
    LinkDown,
    LinkOutput,
    LinkUp,
    OpRefused,
    OpSent,
    RelayPush,
)
from crosstalk.wire import relay as w
from crosstalk.wire.relay_log import ResumedRoom

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_UNROUTED_SLOTS = 16
MAX_UNROUTED_PUSHES = 8


@attrs.frozen(eq=False)
class RoutePairing:
    """Send the pushes of ``slot`` to ``inbox`` (None: stop routing them)."""

    slot: str
    inbox: trio.MemorySendChannel[PairingInput] | None


@attrs.frozen(eq=False)
class WatchInvitation:
    """Tell ``reply`` once an invitation to ``room`` arrives (buffer >= 1)."""

    room: str
    reply: trio.MemorySendChannel[None]


@attrs.frozen(eq=False)
class WatchSent:
    """Tell ``reply`` the seq once ``op_id`` is sequenced by the relay (buffer >= 1); if the
    relay refuses it, ``reply`` is closed (its receiver gets ``trio.EndOfChannel``)."""

    op_id: str
    reply: trio.MemorySendChannel[int]


@attrs.frozen(eq=False)
class PresenceQuery:
    reply: trio.MemorySendChannel[dict[str, bool]]


RouterInput = LinkOutput | RoutePairing | WatchInvitation | WatchSent | PresenceQuery
# Starts a room's actor if needed and rings its doorbell (crosstalk.actors.doorbell).
WakeRoom = Callable[[str], Awaitable[None]]
# Takes the relay's news about membership: a roster (pushed, or answering a request: the link
# tells both, in the order the relay sent them, and rosters are applied only from this news), a
# room_gone push, or the link coming up (rosters pushed while we were away are lost). The
# membership feature gives the daemon this callable
# (crosstalk.features.membership.actor.membership_news), so actors import no feature.
MembershipNews = Callable[[w.Roster | w.RoomGone | LinkUp], Awaitable[None]]
# Told where each room's log stands at the relay each time the link is up again (the features'
# link-up listeners); must not block.
LinkUpListener = Callable[[list[ResumedRoom]], Awaitable[None]]


def _tell(channel: trio.MemorySendChannel[T], value: T) -> None:
    try:
        channel.send_nowait(value)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the waiter left; nothing to do


class Router:
    """Routes link output. ``wake_room(room_id)`` (starts and) wakes a room's actor."""

    def __init__(
        self,
        *,
        wake_room: WakeRoom,
        membership: MembershipNews | None = None,
        link_up: Sequence[LinkUpListener] = (),
    ) -> None:
        self._wake_room = wake_room
        self._membership = membership
        self._link_up_listeners = tuple(link_up)
        self._pairings: dict[str, trio.MemorySendChannel[PairingInput]] = {}
        # Slot pushes that arrive before their pairing registered (a join is answered together
        # with the other side's first messages): kept, bounded, until the route appears.
        self._unrouted: dict[str, list[PairingInput]] = {}
        self._invited: set[str] = set()
        self._invite_waiters: dict[str, list[trio.MemorySendChannel[None]]] = {}
        self._sent_waiters: dict[str, list[trio.MemorySendChannel[int]]] = {}
        self._presence: dict[str, bool] = {}
        self._connected = False

    async def run(
        self,
        ctx: ActorContext[RouterInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            await self._handle(await ctx.receive())

    async def _handle(self, item: RouterInput) -> None:
        if isinstance(item, InboundOp):
            await self._wake(item.room)
        elif isinstance(item, RelayPush):
            await self._push(item.frame)
        elif isinstance(item, OpSent):
            for reply in self._sent_waiters.pop(item.op_id, []):
                _tell(reply, item.seq)
        elif isinstance(item, OpRefused):
            log.warning("the relay refused op %s in %s: %s", item.op_id, item.room, item.error)
            # It will never be sequenced: its waiters hear the end of their channel instead of
            # waiting (and being kept here) for ever.
            for reply in self._sent_waiters.pop(item.op_id, []):
                reply.close()
        elif isinstance(item, LinkUp):
            await self._link_up(item)
        elif isinstance(item, LinkDown):
            self._presence.clear()
        else:
            self._register(item)

    def _register(self, item: RoutePairing | WatchInvitation | WatchSent | PresenceQuery) -> None:
        if isinstance(item, RoutePairing):
            if item.inbox is None:
                self._pairings.pop(item.slot, None)
                self._unrouted.pop(item.slot, None)
            else:
                self._pairings[item.slot] = item.inbox
                for early in self._unrouted.pop(item.slot, []):
                    _tell(item.inbox, early)
        elif isinstance(item, WatchInvitation):
            if item.room in self._invited:
                _tell(item.reply, None)
            else:
                self._invite_waiters.setdefault(item.room, []).append(item.reply)
        elif isinstance(item, WatchSent):
            self._sent_waiters.setdefault(item.op_id, []).append(item.reply)
        else:
            _tell(item.reply, dict(self._presence))

    async def _link_up(self, up: LinkUp) -> None:
        for inbox in list(self._pairings.values()):
            _tell(inbox, Reattach())
        # Roster pushes made while we were away are lost: one fetch per room replaces them.
        await self._to_membership(up)
        for listener in self._link_up_listeners:
            await listener(up.rooms)
        for room in up.rooms:
            await self._wake(room.room)

    async def _wake(self, room: str) -> None:
        await sim_hooks.handoff("handoff.router_to_room")
        await self._wake_room(room)  # level-triggered: never blocks, never dropped

    async def _push(self, frame: w.RelayFrame) -> None:
        if isinstance(frame, w.SlotJoined | w.SlotMsg | w.SlotClosed):
            inbox = self._pairings.get(frame.slot)
            if inbox is not None:
                await inbox.send(frame)
            elif len(self._unrouted) < MAX_UNROUTED_SLOTS:
                early = self._unrouted.setdefault(frame.slot, [])
                if len(early) < MAX_UNROUTED_PUSHES:
                    early.append(frame)
        elif isinstance(frame, w.Invited):
            self._invited.add(frame.room)
            for reply in self._invite_waiters.pop(frame.room, []):
                _tell(reply, None)
        elif isinstance(frame, w.Presence):
            self._presence[frame.fingerprint] = frame.online
        elif isinstance(frame, w.Roster | w.RoomGone):
            await self._to_membership(frame)

    async def _to_membership(self, news: w.Roster | w.RoomGone | LinkUp) -> None:
        if self._membership is not None:
            await self._membership(news)
