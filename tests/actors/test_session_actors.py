"""One actor per attached session (``session-<name>``), under a real supervisor, with the
autojump clock, an in-memory database and fake inbox sockets (no real I/O, so virtual times are
exact): a session whose socket never reads costs its own actor one restart at exactly one
heartbeat, and every other session's pushes keep arriving."""

from __future__ import annotations

import json
import sqlite3

import trio
import trio.testing

from crosstalk.actors.health import ActorState
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.triage import Decision, Intent
from crosstalk.features.inbox.actor import BACKOFF, Nudge, SessionActor, SessionKeeper
from crosstalk.store import attention as db
from crosstalk.store.sessions import register_session
from tests.actors.fakes import running
from tests.actors.gate_world import InlineStore

HEARTBEAT = 1.0
BACKOFF_INITIAL = 0.05  # the supervisor's first restart delay


class Sockets:
    """Fake inbox sockets by path: ``/a.sock`` records what is written, ``/b.sock`` accepts and
    never reads (its write blocks until cancelled, and the cancel time is recorded)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, float]] = []  # (first inner line, virtual time)
        self.frozen_at: list[float] = []
        self.cancelled_at: list[float] = []

    async def connect(self, path: str) -> trio.abc.SendStream:
        stream = trio.testing.MemorySendStream()
        if path == "/b.sock":
            stream.send_all_hook = self._freeze
        else:
            stream.send_all_hook = lambda: self._record(stream)  # type: ignore[assignment,return-value]
        return stream

    async def _record(self, stream: trio.testing.MemorySendStream) -> None:
        line = json.loads(stream.get_data_nowait())
        content = line["message"]["content"].splitlines()[1]
        self.received.append((content, trio.current_time()))

    async def _freeze(self) -> None:
        self.frozen_at.append(trio.current_time())
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled_at.append(trio.current_time())


def _sessions_and_notice(store: InlineStore, message_id: str, session: str) -> None:
    def write(conn: sqlite3.Connection) -> None:
        now = trio.current_time()
        for name, path in (("cc-a", "/a.sock"), ("cc-b", "/b.sock")):
            register_session(
                conn, name=name, client="claude", project="/src", inbox_socket=path, now=now
            )
        db.add_notice(conn, db.Notice(
            message_id=message_id, session=session, target=None, sender="fp", label="ben",
            from_session=None, room_id="r1", intent=Intent.QUESTION, kind="message",
            decision=Decision.NOTICE_NOW, due="now", created_at=now, surfaced_at=now,
            batch=message_id,
        ))

    store.now(write)


async def at(when: float) -> None:
    """Let virtual time run to ``when``, then until every task is blocked."""
    await trio.sleep_until(when)
    await trio.testing.wait_all_tasks_blocked()


async def test_a_frozen_inbox_socket_restarts_only_its_own_session_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """cc-b's socket never reads: session-cc-b is cancelled at exactly one heartbeat and back
    one backoff later, while cc-a gets its pushes at once, before and during cc-b's freeze."""
    store, sockets = InlineStore(), Sockets()
    supervisor = Supervisor(heartbeat=HEARTBEAT, backoff_initial=BACKOFF_INITIAL)
    _sessions_and_notice(store, "m-b", "cc-b")
    _sessions_and_notice(store, "m-a1", "cc-a")

    async def start(name: str) -> trio.MemorySendChannel[Nudge]:
        actor = SessionActor(name, store, clock=trio.current_time, connect=sockets.connect)
        return await supervisor.start_actor(f"session-{name}", actor, inbox_size=1)

    async def stop(name: str) -> None:
        await supervisor.stop_actor(f"session-{name}")

    keeper = SessionKeeper(store, start=start, stop=stop, clock=trio.current_time)
    async with running(supervisor):
        keeper_inbox = await supervisor.start_actor("inbox", keeper, inbox_size=1)
        await at(0.5)
        assert sockets.frozen_at == [0.0]
        _sessions_and_notice(store, "m-a2", "cc-a")
        keeper_inbox.send_nowait(Nudge())  # a commit: the keeper passes it on
        await at(0.5)
        assert [when for _, when in sockets.received] == [0.0, 0.5]
        assert all(line.startswith("ben sent you") for line, _ in sockets.received)

        await at(HEARTBEAT - 0.001)
        assert sockets.cancelled_at == []
        await at(HEARTBEAT)
        assert sockets.cancelled_at == [HEARTBEAT]
        restarts = {h.name: (h.state, h.restarts) for h in supervisor.statistics()}
        assert restarts["session-cc-b"] == (ActorState.RESTARTING, 1)
        await at(HEARTBEAT + BACKOFF_INITIAL)
        restarts = {h.name: (h.state, h.restarts) for h in supervisor.statistics()}
        assert restarts == {
            "inbox": (ActorState.RUNNING, 0),
            "session-cc-a": (ActorState.RUNNING, 0),
            "session-cc-b": (ActorState.RUNNING, 1),
        }
        # The new instance leaves the frozen socket alone for its backoff: no second freeze.
        await at(BACKOFF - 1)
        assert sockets.frozen_at == [0.0]
        assert store.now(lambda c: db.list_notices(c, "cc-b", "/src", pending=True))


async def test_a_session_that_is_gone_loses_its_actor_and_a_new_one_gets_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The keeper stops a session's actor once its row is gone and starts one for a session
    that registered since, at the next sweep."""
    store, sockets = InlineStore(), Sockets()
    supervisor = Supervisor(heartbeat=HEARTBEAT)
    _sessions_and_notice(store, "m-a1", "cc-a")
    started: list[tuple[str, float]] = []

    async def start(name: str) -> trio.MemorySendChannel[Nudge]:
        started.append((name, trio.current_time()))
        actor = SessionActor(name, store, clock=trio.current_time, connect=sockets.connect)
        return await supervisor.start_actor(f"session-{name}", actor, inbox_size=1)

    async def stop(name: str) -> None:
        await supervisor.stop_actor(f"session-{name}")

    keeper = SessionKeeper(store, start=start, stop=stop, clock=trio.current_time)
    async with running(supervisor):
        inbox = await supervisor.start_actor("inbox", keeper, inbox_size=1)
        await at(0.1)
        store.now(lambda c: c.execute("DELETE FROM sessions WHERE name = 'cc-b'"))

        def add_c(conn: sqlite3.Connection) -> None:
            register_session(conn, name="cc-c", client="claude", project="/src",
                             inbox_socket="/c.sock", now=trio.current_time())

        store.now(add_c)
        inbox.send_nowait(Nudge())
        await at(0.1)
        names = [h.name for h in supervisor.statistics()]
        assert names == ["inbox", "session-cc-a", "session-cc-c"]
        assert started == [("cc-a", 0.0), ("cc-b", 0.0), ("cc-c", 0.1)]
