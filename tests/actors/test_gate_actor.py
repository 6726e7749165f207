"""The attention-gate actor against a real (in-memory) database, a fake send_op and the
autojump clock: level from the facts the relay gave us, triage by session status, refusals,
held until idle, timed mutes."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from crosstalk.actors.gate import (
    Arrived,
    GateActor,
    GateInput,
    Me,
    SessionTurned,
    Surfaced,
)
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.attention import summarize
from crosstalk.core.gate_routing import REFUSED, SESSION_TTL
from crosstalk.core.levels import Level, TrustSettings
from crosstalk.core.mute import MuteState
from crosstalk.core.room import Applied
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus
from crosstalk.features.messages.ops import hold_message
from crosstalk.store import attention as db
from crosstalk.store.sessions import register_session, set_status
from crosstalk.wire.room_ops import MessageOp
from tests.actors.fakes import running
from tests.actors.gate_world import (
    BEN,
    BOT,
    CY,
    ME,
    ROOM_BEN,
    ROOM_BOT,
    ROOM_LOUD,
    FakeSendOp,
    InlineStore,
    message,
    populate,
)


@attrs.frozen
class World:
    store: InlineStore
    sent: FakeSendOp
    inbox: trio.MemorySendChannel[GateInput]

    async def arrive(self, *items: object) -> None:
        """Hold applied messages, as the applier does before the gate hears of them (a notice
        reads its message's sender and intent from the held row), hand them to the gate and
        wait until it has decided them."""
        for item in items:
            if isinstance(item, Applied):
                self.store.now(lambda conn, a=item: hold_message(conn, a, me=ME))
        await self.inbox.send(Arrived(tuple(items)))  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()

    async def turn(self, session: str, status: SessionStatus) -> tuple[Surfaced, ...]:
        send, receive = trio.open_memory_channel[tuple[Surfaced, ...]](1)
        await self.inbox.send(SessionTurned(session, status, send))
        with trio.fail_after(1):
            return await receive.receive()

    def notice(self, message_id: str) -> db.Notice:
        found = [n for n in self.store.now(db.list_notices) if n.message_id == message_id]
        assert len(found) == 1, found
        return found[0]


def _session(store: InlineStore, name: str, status: SessionStatus, project: str = "") -> None:
    def write(conn: sqlite3.Connection) -> None:
        now = trio.current_time()
        register_session(
            conn, name=name, client="claude", project=project, inbox_socket=None, now=now
        )
        set_status(conn, name, status, now)

    store.now(write)


def _trust(store: InlineStore, settings: TrustSettings) -> None:
    store.now(lambda conn: db.save_trust(conn, settings))


@asynccontextmanager
async def gate_world(store: InlineStore | None = None) -> AsyncIterator[World]:
    store = store or InlineStore()
    store.now(populate)
    sent = FakeSendOp()
    actor = GateActor(store=store, me=lambda: Me(ME, "me"), send_op=sent, clock=trio.current_time)
    async with running(Supervisor()) as supervisor:
        inbox: trio.MemorySendChannel[GateInput] = await supervisor.start_actor("gate", actor)
        yield World(store, sent, inbox)


async def test_a_bot_stays_at_notify_even_when_trusted_deliver(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A bot pinned at deliver still only gets a notice: the cap is not a setting."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_pin(BOT, Level.DELIVER))
        _session(world.store, "s1", SessionStatus.BUSY)
        await world.arrive(message("m1", BOT, ROOM_BOT, intent=Intent.BLOCKING))
        assert world.notice("m1").decision is Decision.NOTICE_NOW


async def test_the_level_comes_from_the_arrival_room_not_from_the_payload(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Naming a louder room in the payload gains nothing; arriving in it does."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_room(ROOM_LOUD, Level.DELIVER))
        _session(world.store, "s1", SessionStatus.IDLE)
        await world.arrive(
            message(
                "m1",
                BEN,
                ROOM_BEN,
                intent=Intent.BLOCKING,
                thread=ROOM_LOUD,
                from_label="incident",
                to=None,
            ),
            message("m2", BEN, ROOM_LOUD, intent=Intent.BLOCKING),
            message("m3", CY, ROOM_LOUD, intent=Intent.BLOCKING),
        )
        assert world.notice("m1").decision is Decision.NOTICE_NOW
        assert world.notice("m2").decision is Decision.DELIVER_NOW
        # cy shares no room of two with us: capped at notify even in a deliver room.
        assert world.notice("m3").decision is Decision.NOTICE_NOW


async def test_blocking_surfaces_now_to_a_busy_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A blocking message is a notice at once, surfaced when decided, even mid-turn."""
    async with gate_world() as world:
        _session(world.store, "s1", SessionStatus.BUSY)
        await world.arrive(message("m1", BEN, ROOM_BEN, intent=Intent.BLOCKING))
        notice = world.notice("m1")
        assert (notice.decision, notice.due) == (Decision.NOTICE_NOW, "now")
        assert notice.surfaced_at == trio.current_time()


async def test_fyi_to_a_busy_session_waits_for_idle_then_surfaces_once_per_sender(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Held fyi lines surface at the next idle, one batch per sender, and never again."""
    async with gate_world() as world:
        _session(world.store, "s1", SessionStatus.BUSY)
        await world.arrive(
            message("m1", BEN, ROOM_BEN),
            message("m2", BOT, ROOM_BOT),
            message("m3", BEN, ROOM_BEN),
        )
        assert {world.notice(m).decision for m in ("m1", "m2", "m3")} == {Decision.NOTICE_WHEN_IDLE}
        assert world.notice("m1").surfaced_at is None
        assert await world.turn("s1", SessionStatus.BUSY) == ()
        batches = await world.turn("s1", SessionStatus.IDLE)
        assert [(b.label, b.items) for b in batches] == [("ben", ("m1", "m3")), ("bot", ("m2",))]
        assert await world.turn("s1", SessionStatus.IDLE) == ()
        assert world.notice("m1").session == "s1"
        summary = summarize(
            world.store.now(lambda c: db.attention_entries(c, 0.0)), trio.current_time()
        )
        assert (summary.reached_last_hour, summary.held) == (3, 0)
        assert summary.by_source == {"ben": 2, "bot": 1}


async def test_a_message_for_anyone_is_parked_and_claimed_by_the_next_idle_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With no session at all, an fyi waits; the first session to go idle takes it."""
    async with gate_world() as world:
        await world.arrive(message("m1", BEN, ROOM_BEN))
        assert world.notice("m1").session is None
        _session(world.store, "later", SessionStatus.BUSY)
        [batch] = await world.turn("later", SessionStatus.IDLE)
        assert batch.items == ("m1",)
        assert world.notice("m1").session == "later"


async def test_a_message_for_one_session_waits_for_that_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Another session going idle does not release what was addressed to a busy one."""
    async with gate_world() as world:
        _session(world.store, "s1", SessionStatus.IDLE)
        _session(world.store, "s2", SessionStatus.BUSY)
        await world.arrive(message("m1", BEN, ROOM_BEN, to="s2"))
        notice = world.notice("m1")
        assert (notice.session, notice.decision) == ("s2", Decision.NOTICE_WHEN_IDLE)
        assert await world.turn("s1", SessionStatus.IDLE) == ()
        [batch] = await world.turn("s2", SessionStatus.IDLE)
        assert batch.items == ("m1",)


async def test_a_message_for_a_project_outlives_the_session_it_was_routed_to(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Routed to the busy session in project api, which then expires: the next session in api
    takes it when it goes idle (held for the next one), not the dead session."""
    async with gate_world() as world:
        _session(world.store, "first", SessionStatus.BUSY, project="api")
        await world.arrive(message("m1", BEN, ROOM_BEN, to="api"))
        assert world.notice("m1").session == "first"
        await trio.sleep(SESSION_TTL + 1)
        _session(world.store, "second", SessionStatus.BUSY, project="api")
        [batch] = await world.turn("second", SessionStatus.IDLE)
        assert batch.items == ("m1",)
        assert world.notice("m1").session == "second"


async def test_the_mute_level_drops_and_hides_the_message_from_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At `mute` nothing reaches the session; the message is only left for `read --all`."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_pin(BEN, Level.MUTE))
        _session(world.store, "s1", SessionStatus.IDLE)
        applied = message("m1", BEN, ROOM_BEN, intent=Intent.BLOCKING)
        world.store.now(lambda conn: hold_message(conn, applied, me=ME))
        await world.arrive(applied)
        notice = world.notice("m1")
        assert (notice.decision, notice.surfaced_at) == (Decision.DROP, None)
        read_at = world.store.now(
            lambda c: c.execute("SELECT read_at FROM held_messages").fetchone()[0]
        )
        assert read_at == trio.current_time()
        assert await world.turn("s1", SessionStatus.IDLE) == ()


async def test_a_timed_mute_holds_until_it_ends_then_surfaces(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A question from a muted sender waits quietly and surfaces exactly when the mute ends."""
    async with gate_world() as world:
        start = trio.current_time()
        world.store.now(lambda c: db.save_mutes(c, MuteState().mute(BEN, 10, start), start))
        _session(world.store, "s1", SessionStatus.BUSY)
        await world.arrive(message("m1", BEN, ROOM_BEN, intent=Intent.QUESTION))
        assert world.notice("m1").decision is Decision.HOLD_QUIET
        assert await world.turn("s1", SessionStatus.IDLE) == ()
        with trio.fail_after(700):
            while world.notice("m1").surfaced_at is None:
                await world.store.commits.receive()
        assert trio.current_time() == start + 600
        assert world.notice("m1").surfaced_at == start + 600


async def test_a_blocking_message_lifts_through_a_timed_mute_as_a_notice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Blocking is a notice even during a mute, never words."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_pin(BEN, Level.DELIVER))
        now = trio.current_time()
        world.store.now(lambda c: db.save_mutes(c, MuteState().mute(BEN, 10, now), now))
        await world.arrive(message("m1", BEN, ROOM_BEN, intent=Intent.BLOCKING))
        assert world.notice("m1").decision is Decision.NOTICE_NOW


@pytest.mark.parametrize(("level", "kind"), [(Level.NOTIFY, Kind.ASK), (Level.ASK, Kind.HANDOFF)])
async def test_an_ask_or_handoff_below_its_level_is_refused_with_an_answer(
    autojump_clock: trio.testing.MockClock, level: Level, kind: Kind
) -> None:
    """The sender gets an automatic `refused` answer with the ask's correlation, in that room."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_pin(BEN, level))
        await world.arrive(
            message(
                "a1",
                BEN,
                ROOM_BEN,
                kind=kind,
                intent=Intent.QUESTION,
                correlation="corr-1",
                from_session="ben-s",
            )
        )
        assert world.notice("a1").decision is Decision.REFUSE
        [sent] = world.sent.sent
        assert sent.room_id == ROOM_BEN
        assert isinstance(sent.op, MessageOp)
        op = sent.op
        assert (op.kind, op.text, op.correlation) == (Kind.REFUSAL, REFUSED, "corr-1")
        assert (sent.op.reply_to, sent.op.to, sent.op.from_label) == ("a1", "ben-s", "me")
        assert sent.op_id == sent.op.msg_id


async def test_an_ask_at_its_level_is_not_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Someone we share a room of two with starts at ask: their ask lands as a notice."""
    async with gate_world() as world:
        await world.arrive(message("a1", BEN, ROOM_BEN, kind=Kind.ASK, intent=Intent.QUESTION))
        assert world.notice("a1").decision is Decision.NOTICE_NOW
        assert world.sent.sent == []


async def test_redelivery_is_decided_once(autojump_clock: trio.testing.MockClock) -> None:
    """The same op twice gives one notice, one attention entry and one refusal."""
    async with gate_world() as world:
        _trust(world.store, TrustSettings().with_pin(BEN, Level.NOTIFY))
        ask = message("a1", BEN, ROOM_BEN, kind=Kind.ASK, intent=Intent.QUESTION)
        await world.arrive(ask)
        await world.arrive(ask)
        assert len(world.sent.sent) == 1
        assert len(world.store.now(lambda c: db.attention_entries(c, 0.0))) == 1


async def test_our_own_ops_are_not_for_the_gate(autojump_clock: trio.testing.MockClock) -> None:
    """What we (or our other machines) signed never becomes a notice."""
    async with gate_world() as world:
        await world.arrive(message("m1", ME, ROOM_BEN, intent=Intent.BLOCKING))
        assert world.store.now(db.list_notices) == []


async def test_held_messages_committed_before_the_gate_started_are_decided(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A crash between the room's commit and the gate loses no decision."""
    store = InlineStore()
    store.now(
        lambda conn: hold_message(conn, message("m1", BEN, ROOM_BEN, intent=Intent.BLOCKING), me=ME)
    )
    async with gate_world(store) as world:
        await trio.testing.wait_all_tasks_blocked()
        assert world.notice("m1").decision is Decision.NOTICE_NOW
