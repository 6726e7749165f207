"""The relay-link actor against the real relay process on loopback (real clock, bounded waits).

Two identities with their own homes (real ``state.db``) each run a link under a supervisor. The
relay runs as ``python -m crosstalk relay serve`` and is always stopped by its pid.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from crosstalk import crypto
from crosstalk.actors.relay_link import (
    Committed,
    InboundOp,
    LinkDown,
    LinkOutput,
    LinkUp,
    OpSent,
    RelayLink,
    Request,
)
from crosstalk.actors.relay_link_store import device_id
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import CrosstalkError
from crosstalk.store import link as outbox_sql
from crosstalk.store.db import Store, open_store
from crosstalk.store.settings import RELAY_KEYS, set_setting
from crosstalk.wire import relay as w
from tests.actors.test_relay_link_fakes import Running, next_event
from tests.wire.chain_helpers import room_of_two_frames

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
ROOM = "room-of-two"


class RelayProc:
    """The relay on a data directory; restartable on the same port; stopped by pid."""

    def __init__(self, data: Path, log: Path) -> None:
        self.data, self.log = data, log
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0

    def start(self) -> None:
        args = [
            sys.executable,
            "-m",
            "crosstalk",
            "relay",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data",
            str(self.data),
            "--json",
        ]
        with self.log.open("a") as err:
            self.proc = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=20.0):
                self.kill()
                raise AssertionError(f"relay did not start: {self.log.read_text()[-2000:]}")
        line = self.proc.stdout.readline()
        self.port = int(json.loads(line)["listening"].rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[RelayProc]:
    proc = RelayProc(tmp_path / "relay-data", tmp_path / "relay.log")
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


@attrs.define
class Home:
    keys: crypto.Keys
    store: Store
    device: str


@asynccontextmanager
async def home(path: Path) -> AsyncIterator[Home]:
    await trio.Path(path).mkdir()
    async with open_store(path / "state.db") as store:
        keys = crypto.Keys(os.urandom(32), os.urandom(32))
        yield Home(keys, store, await device_id(store))


async def start_link(supervisor: Supervisor, name: str, h: Home, url: str) -> Running:
    send, receive = trio.open_memory_channel[LinkOutput](100)
    link = RelayLink(url=url, keys=h.keys, device=h.device, store=h.store, events=send)
    inbox = await supervisor.start_actor(name, link, channel=link.mailbox)
    return Running(link, inbox, receive, supervisor)


async def ask(running: Running, frame: w.ClientFrame) -> w.RelayFrame:
    send, receive = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
    await running.inbox.send(Request(frame, send))  # type: ignore[arg-type]  # a request frame
    with trio.fail_after(10):
        reply = await receive.receive()
    assert not isinstance(reply, CrosstalkError), reply
    return reply


async def post(running: Running, h: Home, op_id: str, body: bytes) -> None:
    """What a room's send does: commit the post to the outbox, then hand it to the link."""
    item = await h.store.write(
        lambda conn: outbox_sql.queue_post(conn, ROOM, op_id, body, time.time()))
    assert item is not None
    await running.inbox.send(Committed((item,), trio.current_time()))


async def events_until(running: Running, kind: type, *, within: float) -> list[LinkOutput]:
    """Every event up to and including the first of type ``kind``."""
    seen: list[LinkOutput] = []
    with trio.fail_after(within):
        while not seen or not isinstance(seen[-1], kind):
            seen.append(await running.events.receive())
    return seen


async def pair_into_room(a: Running, ka: crypto.Keys, b: Running, kb: crypto.Keys) -> None:
    """Pair through a slot, then create / add / accept the room, all via Request frames."""
    work = await ask(a, w.WorkAsk(0))
    assert isinstance(work, w.Work)
    slot = await ask(a, w.SlotOpen(0, crypto.do_work(work.seed, work.bits)))
    assert isinstance(slot, w.Slot)
    work = await ask(b, w.WorkAsk(0, slot.slot))
    assert isinstance(work, w.Work)
    joined = await ask(b, w.SlotJoin(0, slot.slot, crypto.do_work(work.seed, work.bits)))
    assert isinstance(joined, w.SlotJoined)
    create, add, accept = room_of_two_frames(ka, kb, ROOM)
    assert isinstance(await ask(a, create), w.Ok)
    assert isinstance(await ask(a, add), w.Ok)
    assert isinstance(await ask(b, accept), w.Ok)
    assert isinstance(await ask(a, w.SlotClose(0, slot.slot)), w.Ok)


async def add_room_row(store: Store) -> None:
    """What the room actor would record; the outbox refers to it."""
    await store.write(
        lambda conn: conn.execute(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, 'them', 'direct', 'joined', ?)",
            (ROOM, time.time()),
        )
    )


async def cursor_of(store: Store) -> int | None:
    row = await store.read(
        lambda conn: conn.execute(
            "SELECT seq FROM relay_cursors WHERE room_id = ?", (ROOM,)
        ).fetchone()
    )
    return None if row is None else int(row[0])


async def test_two_links_exchange_ops_in_a_room_they_set_up_by_requests(
    relay: RelayProc, tmp_path: Path
) -> None:
    """Create, add, accept over the real relay; an op crosses each way and is committed first."""
    async with (
        home(tmp_path / "a") as ha,
        home(tmp_path / "b") as hb,
        trio.open_nursery() as nursery,
    ):
        supervisor = Supervisor()
        await nursery.start(supervisor.run)
        a = await start_link(supervisor, "link-a", ha, relay.url)
        b = await start_link(supervisor, "link-b", hb, relay.url)
        for running in (a, b):
            up = await next_event(running, LinkUp, within=20)
            assert up.relay_key.hex() == running.link.statistics().relay_key
        await pair_into_room(a, ha.keys, b, hb.keys)
        for h in (ha, hb):
            await add_room_row(h.store)
        await post(a, ha, "a-1", b"sealed from a")
        assert await next_event(a, OpSent, within=10) == OpSent(ROOM, "a-1", 1)
        got = await next_event(b, InboundOp, within=10)
        assert (got.seq, got.sender_fingerprint, got.body) == (
            1,
            ha.keys.fingerprint,
            b"sealed from a",
        )
        assert await cursor_of(hb.store) == 1
        await post(b, hb, "b-1", b"sealed from b")
        back = await next_event(a, InboundOp, within=10)
        assert (back.seq, back.op_id, back.sender_fingerprint) == (2, "b-1", hb.keys.fingerprint)
        assert [h.restarts for h in supervisor.statistics()] == [0, 0]
        nursery.cancel_scope.cancel()


async def test_links_survive_a_relay_kill_and_resume_from_their_cursors(
    relay: RelayProc, tmp_path: Path
) -> None:
    """kill -9 the relay, restart it on its data and port: both links come back, and a link
    started afresh on a home catches up from its durable cursor."""
    async with (
        home(tmp_path / "a") as ha,
        home(tmp_path / "b") as hb,
        trio.open_nursery() as nursery,
    ):
        supervisor = Supervisor()
        await nursery.start(supervisor.run)
        a = await start_link(supervisor, "link-a", ha, relay.url)
        b = await start_link(supervisor, "link-b", hb, relay.url)
        for running in (a, b):
            await next_event(running, LinkUp, within=20)
        await pair_into_room(a, ha.keys, b, hb.keys)
        await add_room_row(ha.store)
        await post(a, ha, "a-1", b"one")
        assert (await next_event(a, OpSent, within=10)).seq == 1
        assert (await next_event(b, InboundOp, within=10)).seq == 1

        relay.kill(signal.SIGKILL)
        for running in (a, b):
            await next_event(running, LinkDown, within=10)
        await trio.to_thread.run_sync(relay.start)
        for running in (a, b):
            await next_event(running, LinkUp, within=30)

        await supervisor.stop_actor("link-b")
        await post(a, ha, "a-2", b"two")
        await post(a, ha, "a-3", b"three")
        assert [(await next_event(a, OpSent, within=10)).seq for _ in range(2)] == [2, 3]
        b2 = await start_link(supervisor, "link-b", hb, relay.url)
        seen = await events_until(b2, LinkUp, within=20)
        replayed = [(e.seq, e.op_id) for e in seen if isinstance(e, InboundOp)]
        assert replayed == [(2, "a-2"), (3, "a-3")]  # replayed before resume's answer
        up = seen[-1]
        assert isinstance(up, LinkUp) and [r.room for r in up.rooms] == [ROOM]
        assert await cursor_of(hb.store) == 3
        nursery.cancel_scope.cancel()


async def test_a_relay_whose_key_differs_from_the_pin_is_refused_with_a_clear_message(
    relay: RelayProc, tmp_path: Path
) -> None:
    """A wrong pin for the URL: the link never authenticates and says why."""
    async with home(tmp_path / "a") as ha, trio.open_nursery() as nursery:
        await ha.store.write(
            lambda conn: set_setting(
                conn, RELAY_KEYS, {relay.url: base64.b64encode(b"\x05" * 32).decode()}
            )
        )
        supervisor = Supervisor()
        await nursery.start(supervisor.run)
        a = await start_link(supervisor, "link-a", ha, relay.url)
        down = await next_event(a, LinkDown, within=10)
        assert "will not talk to it" in down.reason
        status = a.link.statistics()
        assert not status.connected and status.relay_key == (b"\x05" * 32).hex()
        assert status.last_error == down.reason
        nursery.cancel_scope.cancel()


async def test_a_frozen_relay_process_is_left_by_ping_timeout_and_rejoined_when_it_thaws(
    relay: RelayProc, tmp_path: Path
) -> None:
    """SIGSTOP the relay: no pong, the link drops it within seconds (not trio-websocket's 60 s
    defaults); SIGCONT: the link reconnects on its own, with no actor restart."""
    async with home(tmp_path / "a") as ha, trio.open_nursery() as nursery:
        supervisor = Supervisor()
        await nursery.start(supervisor.run)
        a = await start_link(supervisor, "link-a", ha, relay.url)
        await next_event(a, LinkUp, within=20)
        assert relay.proc is not None
        os.kill(relay.proc.pid, signal.SIGSTOP)
        try:
            frozen_at = trio.current_time()
            down = await next_event(a, LinkDown, within=15)
            assert "no pong" in down.reason
            assert trio.current_time() - frozen_at < 10.0
        finally:
            os.kill(relay.proc.pid, signal.SIGCONT)
        await next_event(a, LinkUp, within=30)
        assert [h.restarts for h in supervisor.statistics()] == [0]
        nursery.cancel_scope.cancel()
