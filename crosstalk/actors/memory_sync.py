"""The memory-sync actor: the shell of :class:`crosstalk.core.memory_sync.MemorySyncState`.

Every rule (when to ask whom, when to give a hole up, whom to ask for a repair, when to probe) is
in the core. This shell, on each input and at each deadline, under one lock (the inbox loop and
the watchers of sequenced ops both feed the core):

1. tells the core what the store shows (rooms we are in, holes, conceded memories);
2. feeds it the input (a peer's request with our memory's state, a link-up, the start probe, an
   ask the relay sequenced);
3. ticks it with the time, and with presence and rosters for the rooms it says are due;
4. carries out its commands: posts requests and snapshot pieces, writes the store (give a hole
   up, drop a journal), and logs its events.

The memory itself (holes, parked ops, snapshots, the repair journal) lives in the store:
:mod:`crosstalk.store.memory_log`. Our own ops' late outcomes are watched here too: a claim that
answered ``pending`` is applied and reported once the relay sequences it.

Its inputs and its store's interface are in :mod:`crosstalk.actors.memory_sync_api`.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

import trio

from crosstalk import crypto
from crosstalk.actors.context import ActorContext
from crosstalk.actors.memory_sync_api import (
    Answer,
    MemorySyncInput,
    Nudge,
    Probed,
    Resumed,
    SnapshotSeen,
    SyncStore,
    WatchOwn,
)
from crosstalk.core import memory_sync as core
from crosstalk.core.memory_transfer import pack_snapshot, signed_message
from crosstalk.errors import CrosstalkError, RemoteProtocolError
from crosstalk.logs import repeats_from_env
from crosstalk.wire.room_ops import RoomOp, SyncChunk, SyncRequest

log = logging.getLogger(__name__)

RETRY_AFTER, PROBE_EVERY, JOURNAL_MAX = core.RETRY_AFTER, core.PROBE_EVERY, core.JOURNAL_MAX


Feed = Callable[[], Awaitable[None]]


class MemorySync:
    """The actor. ``send_op`` posts a room op; ``presence`` maps fingerprints to online."""

    def __init__(
        self,
        *,
        keys: crypto.Keys,
        store: SyncStore,
        send_op: Callable[[str, RoomOp], Awaitable[str]],
        presence: Callable[[], Awaitable[dict[str, bool]]],
        wait_sent: Callable[[str], Awaitable[bool]],
    ) -> None:
        self._keys = keys
        self._store = store
        self._send_op = send_op
        self._presence = presence
        self._wait_sent = wait_sent
        self._core = core.MemorySyncState(keys.fingerprint)
        self._lock = trio.Lock()  # the inbox loop and the watchers both feed the core
        # A hole nobody fills is asked about every RETRY_AFTER: said when it begins (or turns
        # from "nobody online" to "asking"), then summarised, until it is filled.
        self._hole_said = repeats_from_env()
        self._beat: Callable[[], None] = lambda: None
        self._nursery: trio.Nursery | None = None

    async def run(
        self,
        ctx: ActorContext[MemorySyncInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._beat = ctx.beat
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            for room, op_id, _kind in await self._store.unreported():
                self._watch(room, op_id)
            await self._step(None)
            while True:
                with trio.move_on_at(self._core.next_deadline()):
                    await self._handle(await ctx.receive())
                    ctx.beat()
                    continue
                await self._step(None)
                ctx.beat()

    async def _handle(self, item: MemorySyncInput) -> None:
        if isinstance(item, Nudge):
            for room in item.rooms:
                await self._store.advance(room)
            await self._step(None)
            await self._report_resolved()
        elif isinstance(item, Answer):
            await self._step(lambda: self._asked(item))
        elif isinstance(item, SnapshotSeen):
            await self._step(lambda: self._seen(item))
        elif isinstance(item, Probed):
            await self._step(lambda: self._started(item.rooms))
        elif isinstance(item, Resumed):
            await self._step(lambda: self._resumed(item.firsts))
        else:
            self._watch(item.room, item.op_id)

    async def _step(self, feed: Feed | None) -> None:
        """Observe the store, feed the core one input, tick it, carry out what it says."""
        async with self._lock:
            view = await self._store.view()
            self._core.observe(view.joined, set(view.stalled), dict(view.repairing))
            if feed is not None:
                await feed()
            now = trio.current_time()
            due = self._core.rooms_due(now)
            online = await self._online() if due else set()
            rosters = {room: await self._store.members(room) for room in due}
            inviters = {room: await self._store.inviter(room) for room in due}
            self._core.tick(now, online, rosters, inviters)
            await self._carry_out()

    async def _online(self) -> set[str]:
        return {fp for fp, up in (await self._presence()).items() if up}

    # --- inputs ----------------------------------------------------------------------------------

    async def _started(self, rooms: tuple[str, ...]) -> None:
        self._core.started(rooms, trio.current_time())

    async def _resumed(self, firsts: tuple[tuple[str, int], ...]) -> None:
        for room, first in firsts:
            if self._core.state(room) is not core.SyncState.OUT:
                through = await self._store.received_through(room)
                self._core.room(room).log_resumed(first, through)

    async def _asked(self, item: Answer) -> None:
        ours = await self._store.ours(item.room)
        try:
            self._core.room(item.room).snapshot_asked(
                item.request_id, item.requester, item.held_from, repair=item.repair, ours=ours
            )
        except RemoteProtocolError as exc:
            log.warning("room %s: %s from %s; starting its sync afresh", item.room, exc.message,
                        item.requester)
            self._core.room(item.room).left()  # the next look finds it joined and probes it

    async def _seen(self, item: SnapshotSeen) -> None:
        self._core.room(item.room).snapshot_seen(item.sender)

    async def _heard(self, room: str, generation: int, op_id: str, asked: str) -> None:
        """An ask counts once the relay has sequenced it (while we are cut off it waits queued);
        a refused one never does."""
        if await self._wait_sent(op_id):
            now = trio.current_time()
            await self._step(lambda: self._feed_heard(room, generation, asked, now))

    async def _feed_heard(self, room: str, generation: int, asked: str, now: float) -> None:
        self._core.room(room).ask_heard(generation, asked, now)

    def _watch(self, room: str, op_id: str) -> None:
        async def watcher() -> None:
            if not await self._wait_sent(op_id):
                return  # refused: nothing of ours to apply or report
            await self._store.advance(room)
            await self._report_resolved()
            await self._step(None)

        assert self._nursery is not None
        self._nursery.start_soon(watcher)

    # --- outputs ---------------------------------------------------------------------------------

    async def _carry_out(self) -> None:
        for event in self._core.events():
            self._tell(event)
        for command in self._core.commands_to_send():
            if isinstance(command, core.AskForSnapshot):
                await self._ask(command)
            elif isinstance(command, core.SendSnapshot):
                await self._send_snapshot(command)
            elif isinstance(command, core.PostProbe):
                await _probe_one(self._store, self._send_op, command.room, self._watch)
            elif isinstance(command, core.AskForRepair):
                await self._ask_repair(command)
            elif isinstance(command, core.GiveUpHole):
                log.warning("room %s: nobody can fill our memory hole (%s); giving it up",
                            command.room, command.why)
                await self._store.concede(command.room)
            else:
                log.warning("room %s: no member repaired the memory we gave up within %d ops; "
                            "it stays without them", command.room, JOURNAL_MAX)
                await self._store.drop_journal(command.room)

    def _tell(self, event: core.Event) -> None:
        if isinstance(event, core.Moved):
            log.debug("memory_sync room %s[%s].%s -> [%s]", event.room, event.before.name,
                      event.happened.value, event.after.name)
            if event.after not in (core.SyncState.ASKING, core.SyncState.EXHAUSTED):
                self._hole_said.cleared(event.room)
        elif isinstance(event, core.NobodyToAsk):
            say = self._hole_said.seen(event.room, "nobody online", trio.current_time())
            if say is not None:
                log.info("room %s: memory hole, and no member online to ask yet%s", event.room,
                         say.note)
        else:
            log.info("room %s: %s asked for our memory; not answering: %s", event.room,
                     event.requester, event.why)

    async def _ask(self, command: core.AskForSnapshot) -> None:
        room, asked = command.room, command.member
        have = (await self._store.cursor(room)).last_seq
        held = await self._store.held_from(room)
        request_id = secrets.token_hex(8)
        await self._store.note_request(room, request_id, asked)
        say = self._hole_said.seen(room, "asking", trio.current_time())
        if say is not None:
            log.info("room %s: asking %s for a memory snapshot (%s)%s", room, asked, request_id,
                     say.note)
        try:
            op_id = await self._send_op(room, SyncRequest(request_id, have, asked, held))
        except CrosstalkError as exc:
            log.warning("room %s: snapshot request not queued: %s", room, exc.message)
            return
        self._watch(room, op_id)
        assert self._nursery is not None
        self._nursery.start_soon(self._heard, room, command.generation, op_id, asked)

    async def _ask_repair(self, command: core.AskForRepair) -> None:
        room = command.room
        have = (await self._store.cursor(room)).last_seq
        log.info("room %s: asking %s to repair the memory we gave up", room, command.member)
        request = SyncRequest(secrets.token_hex(8), have, command.member, repair=True)
        try:
            self._watch(room, await self._send_op(room, request))
        except CrosstalkError as exc:
            log.warning("room %s: repair request not queued: %s", room, exc.message)

    async def _send_snapshot(self, command: core.SendSnapshot) -> None:
        found = await self._store.snapshot(command.room)
        if found is None:  # a hole opened since the core decided; the asker asks again
            log.info("room %s: our memory has a hole again; not answering", command.room)
            return
        snapshot, conceded = found
        digest, pieces = pack_snapshot(snapshot)
        message = signed_message(command.room, command.request_id, snapshot.last_seq, digest)
        sig = crypto.sign(self._keys, message)
        log.info(
            "room %s: sending memory at seq %d to %s in %d pieces",
            command.room, snapshot.last_seq, command.requester, len(pieces),
        )
        for index, piece in enumerate(pieces):
            chunk = SyncChunk(
                command.request_id, snapshot.last_seq, index, len(pieces), digest, sig, piece,
                conceded,
            )
            self._watch(command.room, await self._send_op(command.room, chunk))
            self._beat()  # a large snapshot takes a while to queue

    # --- our own ops -----------------------------------------------------------------------------

    async def _report_resolved(self) -> None:
        for room, op_id, kind in await self._store.unreported():
            outcome = await self._store.outcome(room, op_id)
            if outcome is None:
                continue
            if kind == "TaskClaim":
                log.info(
                    "room %s: our pending claim %s resolved: %s%s",
                    room, op_id, outcome.claim_answer,
                    f" (held by {outcome.winner.label})" if outcome.winner else "",
                )
            await self._store.mark_reported(op_id)


async def probe(
    store: SyncStore,
    send_op: Callable[[str, RoomOp], Awaitable[str]],
    inbox: trio.MemorySendChannel[MemorySyncInput],
) -> None:
    """Post a probe in every joined room; the actor watches each and probes later joins."""
    watched: list[tuple[str, str]] = []
    rooms = await store.rooms()
    for room in rooms:
        await _probe_one(store, send_op, room, lambda r, o: watched.append((r, o)))
    for room, op_id in watched:
        await inbox.send(WatchOwn(room, op_id))
    await inbox.send(Probed(tuple(rooms)))


async def _probe_one(
    store: SyncStore,
    send_op: Callable[[str, RoomOp], Awaitable[str]],
    room: str,
    watch: Callable[[str, str], None],
) -> None:
    """A request naming nobody: once sequenced, it shows whether ops before it are gone."""
    have = (await store.cursor(room)).last_seq
    try:
        op_id = await send_op(room, SyncRequest(secrets.token_hex(8), have, None))
    except CrosstalkError as exc:
        log.warning("room %s: memory probe not queued: %s", room, exc.message)
        return
    watch(room, op_id)
