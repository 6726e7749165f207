"""Reconciling with the relay at link-up never undoes an accept that finished meanwhile, and
finishes a join that a crash cut short before we named ourselves.

The simulation's seed 229: the membership actor asked the relay which rooms we are in (it said
"invited"), the user's accept then joined at the relay and here, and only then did the
reconcile read our rooms ("joined"): the stale pair read as "removed and invited back", and the
room went back to an invitation, so nothing more in it reached us.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import attrs
import pytest
import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings, Request
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.errors import RelayUnreachable
from crosstalk.features.membership.actor import MembershipInput, Refresh
from crosstalk.features.membership.lifecycle import reconcile_with_relay
from crosstalk.features.rooms.ops import create
from crosstalk.store.db import Store, open_store
from crosstalk.store.membership import (
    key_shares_owed,
    local_rooms,
    mark_joined,
    names_owed,
    owe_key_shares,
    set_create_pending,
)
from crosstalk.store.messages import delivery_state
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room, get_room
from crosstalk.wire import relay as w
from crosstalk.wire.control.params import CreateParams
from crosstalk.wire.room_ops import KeyShare, MemberNamed, RoomOp

ROOM = "r" * 32
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)


class _Host:
    """The daemon as reconciling sees it: a real store and relay client; nothing is sent."""

    def __init__(self, store: Store, relay: RelayClient) -> None:
        self.store = store
        self._relay = relay

    @property
    def keys(self) -> crypto.Keys:
        return ME

    def own_label(self) -> str:
        return "ana"

    async def relay(self) -> RelayClient:
        return self._relay

    async def wake_room(self, room_id: str) -> None:
        raise AssertionError(f"no room is joined by reconciling here ({room_id})")

    async def send_op(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str:
        raise AssertionError(f"nothing is sent by reconciling here ({room_id})")


def _invited(conn: sqlite3.Connection) -> None:
    add_room(conn, Room(ROOM, "team", "shared", "invited", 0, 0.0), b"k" * 32)
    add_member(conn, RoomMember(ROOM, ME.fingerprint, "ana", ME.ed_pub, ME.x_pub, "invited"))


async def _relay_answering_while_accept_finishes(
    store: Store, commands: trio.MemoryReceiveChannel[LinkCommand]
) -> None:
    """The relay lists the room as "invited"; before that answer arrives, the accept's local
    half commits (the relay had taken the accept just after listing)."""
    request = await commands.receive()
    assert isinstance(request, Request) and isinstance(request.frame, w.ListRooms)
    await store.write(lambda conn: mark_joined(conn, ROOM, ME.fingerprint))
    request.reply.send_nowait(w.RoomList(0, [w.RoomEntry(ROOM, "invited")]))


async def test_an_accept_finishing_during_the_relays_answer_stays_joined(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A room accepted while the reconcile waited on the relay's list is still joined after."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_invited)
        send, receive = trio.open_memory_channel[LinkCommand](1)
        host = _Host(store, RelayClient(send, LinkTimings()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_relay_answering_while_accept_finishes, store, receive)
            await reconcile_with_relay(host, lambda: None, 5.0)
        room = await store.read(lambda conn: get_room(conn, ROOM))
        assert room.state == "joined"


class _Naming(_Host):
    """A host that records what reconciling sends and commits each op's ``also`` as the
    outbox commit would."""

    def __init__(self, store: Store, relay: RelayClient) -> None:
        super().__init__(store, relay)
        self.sent: list[tuple[str, RoomOp]] = []

    async def send_op(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None, epoch: int | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        self.sent.append((room_id, op))
        if also is not None:
            await self.store.write(also)
        return "op"


async def _relay_lists_us_joined(commands: trio.MemoryReceiveChannel[LinkCommand]) -> None:
    request = await commands.receive()
    assert isinstance(request, Request) and isinstance(request.frame, w.ListRooms)
    request.reply.send_nowait(w.RoomList(0, [w.RoomEntry(ROOM, "joined")]))


async def test_a_crash_between_joining_and_naming_ourselves_is_finished_at_link_up(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The simulation's seed 38 (under another schedule of the fan-out): the daemon died after
    the accept's local commit and before our ``MemberNamed`` was queued. Without it, the member
    holding the room's newer key never shared it, and every op under that epoch waited at us
    for ever. The next link-up names us, once."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_invited)
        await store.write(lambda conn: mark_joined(conn, ROOM, ME.fingerprint))  # then the crash
        send, receive = trio.open_memory_channel[LinkCommand](1)
        host = _Naming(store, RelayClient(send, LinkTimings()))
        for _ in range(2):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_relay_lists_us_joined, receive)
                assert await reconcile_with_relay(host, lambda: None, 5.0) == [ROOM]
        assert host.sent == [(ROOM, MemberNamed({ME.fingerprint: "ana"}))]
        assert await store.read(names_owed) == []


def _made_alone(conn: sqlite3.Connection, *, confirmed: bool) -> None:
    """A room we created, with only us in it; the relay confirmed its creation or not."""
    add_room(conn, Room(ROOM, "solo", "shared", "joined", 0, 0.0), b"k" * 32)
    add_member(conn, RoomMember(ROOM, ME.fingerprint, "ana", ME.ed_pub, ME.x_pub, "member",
                                ME.fingerprint))
    set_create_pending(conn, ROOM, not confirmed)


async def _relay_knowing(
    commands: trio.MemoryReceiveChannel[LinkCommand], frames: list[w.ClientFrame]
) -> None:
    """A relay that lists no room and answers a create (and anything after it) with ok."""
    async for request in commands:
        assert isinstance(request, Request)
        frames.append(request.frame)
        if isinstance(request.frame, w.ListRooms):
            request.reply.send_nowait(w.RoomList(0, []))
        else:
            request.reply.send_nowait(w.Ok(0))


@pytest.mark.parametrize("confirmed", [True, False])
async def test_only_a_creation_the_relay_never_confirmed_is_made_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, confirmed: bool
) -> None:
    """The simulation's seed 800: a leave of a room we were alone in deleted it at the relay,
    and the link-up's reconcile, which had read the room as still joined here, created it
    again, so the relay kept us in a room we had left. A room whose creation the relay
    confirmed and that it does not know now is taken as gone; only an unconfirmed one (the
    create's request or answer was lost) is created again, and is then confirmed."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(lambda conn: _made_alone(conn, confirmed=confirmed))
        send, receive = trio.open_memory_channel[LinkCommand](4)
        frames: list[w.ClientFrame] = []
        host = _Host(store, RelayClient(send, LinkTimings()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_relay_knowing, receive, frames)
            await reconcile_with_relay(host, lambda: None, 5.0)
            nursery.cancel_scope.cancel()
        creates = [f for f in frames if isinstance(f, w.Create)]
        local = await store.read(lambda conn: local_rooms(conn, ME.fingerprint))
    if confirmed:
        assert creates == [] and local == []  # taken as removed
    else:
        assert len(creates) == 1 and local == [(ROOM, "joined", False)]


async def test_an_invitation_the_relay_dropped_keeps_what_we_sent_in_the_room_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The simulation's seed 921: we were in the room and posted, were removed, invited back,
    and the invitation was withdrawn while we were away. Forgetting that invitation deleted the
    room's row and with it the outbox rows, so ``sent`` went from ``sent`` back to ``queued``."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_invited)

        def posted_then_invited_back(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
                "VALUES ('m1', ?, x'00', 'sent', 3, 0)", (ROOM,),
            )

        await store.write(posted_then_invited_back)
        send, receive = trio.open_memory_channel[LinkCommand](4)
        host = _Host(store, RelayClient(send, LinkTimings()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_relay_knowing, receive, [])
            await reconcile_with_relay(host, lambda: None, 5.0)
            nursery.cancel_scope.cancel()
        assert await store.read(lambda conn: delivery_state(conn, "m1")) == ("sent", None)
        assert await store.read(lambda conn: local_rooms(conn, ME.fingerprint)) == []
        assert (await store.read(lambda conn: get_room(conn, ROOM))).state == "left"


async def test_keys_owed_to_a_joiner_when_a_crash_came_first_are_sent_at_link_up(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The simulation's seed 297: the one member holding the room's newer key applied a
    joiner's name under the older epoch and crashed before the listener sent the share; the
    debt, written with that commit, is paid by the next link-up's reconcile."""
    cy = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
    async with open_store(tmp_path / "state.db") as store:
        def room_at_epoch_1(conn: sqlite3.Connection) -> None:
            add_room(conn, Room(ROOM, "team", "shared", "joined", 1, 0.0), b"1" * 32)
            add_member(conn, RoomMember(ROOM, ME.fingerprint, "ana", ME.ed_pub, ME.x_pub))
            add_member(conn, RoomMember(ROOM, cy.fingerprint, "cy", cy.ed_pub, cy.x_pub))
            owe_key_shares(conn, ROOM, cy.fingerprint, 0)

        await store.write(room_at_epoch_1)
        send, receive = trio.open_memory_channel[LinkCommand](1)
        host = _Naming(store, RelayClient(send, LinkTimings()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_relay_lists_us_joined, receive)
            await reconcile_with_relay(host, lambda: None, 5.0)
        shares = [op for _, op in host.sent if isinstance(op, KeyShare)]
        assert [(s.epoch, list(s.sealed)) for s in shares] == [(1, [cy.fingerprint])]
        assert await store.read(key_shares_owed) == []


class _Unanswered:
    """A relay that never answers the create in time."""

    async def request(self, *_: object, **__: object) -> w.RelayFrame:
        raise RelayUnreachable("The relay did not answer in time.")


class _Creating:
    """The daemon as ``room create`` sees it, with the membership actor's inbox."""

    def __init__(self, store: Store, inbox: trio.MemorySendChannel[MembershipInput]) -> None:
        self.store, self.keys, self.membership = store, ME, inbox

    def require_identity(self) -> object:
        return attrs.make_class("Identity", ["label"])("ana")

    async def relay(self) -> _Unanswered:
        return _Unanswered()


async def test_a_create_the_relay_did_not_answer_asks_for_a_reconcile_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The simulation's seed 1934: the link stayed up through a slow spell, so the room the
    relay never answered waited here for a link-up that did not come. The create now asks the
    membership actor to reconcile (which makes the room at the relay, retrying while it fails)."""
    async with open_store(tmp_path / "state.db") as store:
        send, receive = trio.open_memory_channel[MembershipInput](4)
        daemon = _Creating(store, send)
        with pytest.raises(RelayUnreachable):
            await create(daemon, CreateParams("solo"))  # type: ignore[arg-type]
        assert isinstance(receive.receive_nowait(), Refresh)
        [(_, state, unconfirmed)] = await store.read(
            lambda conn: local_rooms(conn, ME.fingerprint)
        )
        assert (state, unconfirmed) == ("joined", True)
