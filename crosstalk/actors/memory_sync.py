"""The memory-sync actor: catch-up beyond the relay's retention, and our own ops' late outcomes.

What it does (the rules of the log itself live in :mod:`crosstalk.store.memory_log`):

* **Probe at start** (:func:`probe`, run by the daemon's start hook before the room actors are
  started, so it never races the daemon starting them): for every joined room a ``SyncRequest``
  that asks nobody. Once the relay sequences it, the follower sees whether ops before it are gone
  (we were away past the retention, or joined after the room's first ops) and marks a *hole*.
* **Ask.** For each room with a hole and no request in flight it picks an online member (relay
  presence; never ourselves; not one already tried for this hole while others remain), records the
  request id (the follower accepts pieces only for it) and posts ``SyncRequest(ask=member)``. If
  no snapshot has arrived :data:`RETRY_AFTER` seconds later, it asks the next one, round after
  round. With nobody
  online it posts nothing and looks again on the next nudge or timer.
* **Answer.** When a request names us and our own memory has no hole, it sends our snapshot:
  compressed, split into ``SyncChunk`` ops, signed over its digest
  (:mod:`crosstalk.core.memory_transfer`).
* **Concede.** A hole nobody can fill (its ops were only ever held by members since removed, or
  the relay started everyone now in the room after them) would leave every member asking the
  others for ever, each refusing while its own memory has a hole (sim seed 118). So a member
  gives its hole up (:meth:`MemoryFollower.concede`: the missing seqs count as holding no memory
  op) and answers when (a) every online member has had an ask of ours, sequenced by the relay,
  for :data:`RETRY_AFTER` and none filled the hole (*exhausted*), and (b) the asker's hole ends
  later than ours (``held_from``, ties broken by fingerprint): the member that missed least
  concedes, once, and everyone else installs its snapshot, so replicas converge. Alone in the
  room (no other joined member, online or not) it concedes after one :data:`RETRY_AFTER`. Ops
  that only a member offline for all that while holds are then lost to memory (the relay starts
  a new member at the head of the log, so it cannot fill the hole either), unless a repair
  brings them back.
* **Repair.** A memory that gave a hole up (or installed the snapshot of one that did) keeps a
  journal of the ops after it (:mod:`crosstalk.store.memory_log`, "Repair"), and every
  :data:`PROBE_EVERY` seconds asks each online member it has not asked yet in this run for a
  snapshot with ``repair`` set. Only a member whose memory gave nothing up answers one; its
  snapshot, installed under the journal, repairs every conceded member that sees it. A journal
  past :data:`JOURNAL_MAX` ops is dropped (that memory stays without the ops it gave up).
* **Own ops.** A claim that answered ``pending`` (the relay was unreachable) is watched here; when
  the relay sequences it, its outcome is applied and reported (logged, and marked reported).

* **Probe after a link-up** (:class:`Resumed`): a room whose oldest op still at the relay
  comes after the last we hold lost ops to the relay's retention while we were away; it is
  probed like a room at start.

Inputs: :class:`Nudge` (rooms that just committed ops), :class:`Answer`, :class:`WatchOwn`,
:class:`Resumed`.
Time: one deadline, the earliest retry (or the next look for newly joined rooms, every
:data:`PROBE_EVERY` seconds), waited on with ``move_on_at`` around the inbox.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio

from crosstalk import crypto
from crosstalk.actors.context import ActorContext
from crosstalk.core.memory_transfer import pack_snapshot, signed_message
from crosstalk.errors import CrosstalkError
from crosstalk.logs import repeats_from_env
from crosstalk.store.memory import MemoryCursor
from crosstalk.wire.memory import MemorySnapshot, Outcome
from crosstalk.wire.room_ops import RoomOp, SyncChunk, SyncRequest

log = logging.getLogger(__name__)

RETRY_AFTER = 15.0
PROBE_EVERY = 15.0  # how often to look for rooms joined since start, and for members to repair
JOURNAL_MAX = 10_000  # ops a conceded memory keeps while it waits for a repair


@attrs.frozen
class Nudge:
    """Ops were just committed in these rooms: look for holes and resolved outcomes."""

    rooms: tuple[str, ...]


@attrs.frozen
class Answer:
    """``requester`` asked us for the memory of ``room``."""

    room: str
    request_id: str
    requester: str
    held_from: int | None = None  # the requester's (None: an older peer that does not say)
    repair: bool = False  # the requester gave a hole up; answer only with a complete memory


@attrs.frozen
class WatchOwn:
    """Tell the sender of ``op_id`` its outcome once the relay sequences it."""

    room: str
    op_id: str


@attrs.frozen
class Probed:
    """These rooms were probed at start (by :func:`probe`); later joins are probed by the actor."""

    rooms: tuple[str, ...]


@attrs.frozen
class Resumed:
    """The relay link is up again: per room, the oldest seq the relay still holds."""

    firsts: tuple[tuple[str, int], ...]


MemorySyncInput = Nudge | Answer | WatchOwn | Probed | Resumed


class SyncStore(Protocol):
    """What the actor reads and writes; the real one is
    :class:`crosstalk.actors.memory_sync_store.StoreAdapter`."""

    async def rooms(self) -> list[str]: ...

    async def members(self, room: str) -> list[str]:
        """The room's joined members (not those only invited), ourselves included."""

    async def cursor(self, room: str) -> MemoryCursor: ...

    async def received_through(self, room: str) -> int:
        """The seq through which we hold the room's log: committed by the link (applied or
        not), or reached by a memory snapshot."""
        ...

    async def stalled(self) -> list[MemoryCursor]: ...

    async def note_request(self, room: str, request_id: str, asked: str | None) -> None: ...

    async def snapshot(self, room: str) -> tuple[MemorySnapshot, bool] | None:
        """The room's memory and whether it gave a hole up; None while it has a hole."""

    async def repairing(self) -> list[tuple[str, int]]:
        """``(room, ops journaled)`` for rooms whose memory gave a hole up and can be repaired."""

    async def drop_journal(self, room: str) -> None: ...

    async def advance(self, room: str) -> None: ...

    async def held_from(self, room: str) -> int | None:
        """The first seq after the room's hole we hold; None without a hole."""

    async def concede(self, room: str) -> None:
        """Give up the room's hole: apply what we hold after it (see the module note)."""

    async def unreported(self) -> list[tuple[str, str, str]]: ...

    async def outcome(self, room: str, op_id: str) -> Outcome | None: ...

    async def mark_reported(self, op_id: str) -> None: ...


@attrs.define
class _Asking:
    request_id: str
    deadline: float
    tried: set[str]
    heard: dict[str, float]  # when the relay first sequenced an ask of ours to each member
    exhausted: bool = False  # every online member has had an ask for RETRY_AFTER, in vain


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
        self._asking: dict[str, _Asking] = {}
        # A hole nobody fills is asked about every RETRY_AFTER: said when it begins (or turns
        # from "nobody online" to "asking"), then summarised, until it is filled.
        self._hole_said = repeats_from_env()
        self._ask_lock = trio.Lock()  # the inbox loop and the watchers both ask
        self._beat: Callable[[], None] = lambda: None
        self._probed: set[str] | None = None  # None until the start probe has run
        self._next_probe = float("inf")
        self._repair_asked: dict[str, set[str]] = {}  # per room, members asked in this run

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
            await self._at_start()
            while True:
                with trio.move_on_at(self._next_deadline()):
                    item = await ctx.receive()
                    await self._handle(item)
                    ctx.beat()
                    continue
                await self._ask_where_needed()
                await self._look_around()
                ctx.beat()

    def _next_deadline(self) -> float:
        return min([a.deadline for a in self._asking.values()] + [self._next_probe])

    async def _look_around(self) -> None:
        """Every PROBE_EVERY seconds: probe rooms joined since start, ask for repairs."""
        now = trio.current_time()
        if self._probed is None or now < self._next_probe:
            return
        self._next_probe = now + PROBE_EVERY
        await self._probe_new_rooms(self._probed)
        await self._ask_for_repairs()

    async def _probe_new_rooms(self, probed: set[str]) -> None:
        """Probe rooms joined since start (a new member starts at the head of the log). A room
        we have left or were removed from is forgotten here too, so joining it again is probed
        again: a rejoiner starts at the head like any joiner (sim seed 4483: a creator that left
        and came back held none of the facts added while it was out; 8678: the same after a
        removal)."""
        joined = await self._store.rooms()
        probed.intersection_update(joined)
        for room in joined:
            if room not in probed:
                probed.add(room)
                await _probe_one(self._store, self._send_op, room, self._watch)

    async def _probe_pruned(self, firsts: tuple[tuple[str, int], ...]) -> None:
        """Probe each room whose oldest op held at the relay comes after a gap in what we hold:
        the relay dropped ops we never got (we were away past its retention), and no later op
        may come to show the gap (e2e, under load: a claim made while the relay was down never
        reached a member that reconnected after the retention, until someone wrote again)."""
        joined = set(await self._store.rooms())
        for room, first in firsts:
            if room in joined and first - 1 > await self._store.received_through(room):
                await _probe_one(self._store, self._send_op, room, self._watch)

    _nursery: trio.Nursery

    async def _at_start(self) -> None:
        for room, op_id, _kind in await self._store.unreported():
            self._watch(room, op_id)
        await self._ask_where_needed()

    async def _handle(self, item: MemorySyncInput) -> None:
        if isinstance(item, Nudge):
            for room in item.rooms:
                await self._store.advance(room)
            await self._ask_where_needed()
            await self._report_resolved()
        elif isinstance(item, Answer):
            await self._answer(item)
        elif isinstance(item, Probed):
            self._probed = set(item.rooms) | (self._probed or set())
            self._next_probe = trio.current_time() + PROBE_EVERY
        elif isinstance(item, Resumed):
            await self._probe_pruned(item.firsts)
        else:
            self._watch(item.room, item.op_id)

    def _watch(self, room: str, op_id: str) -> None:
        async def watcher() -> None:
            if not await self._wait_sent(op_id):
                return  # refused: nothing of ours to apply or report
            await self._store.advance(room)
            await self._report_resolved()
            await self._ask_where_needed()

        self._nursery.start_soon(watcher)

    # --- asking ----------------------------------------------------------------------------------

    async def _ask_where_needed(self) -> None:
        async with self._ask_lock:
            await self._ask_locked()

    async def _ask_locked(self) -> None:
        now = trio.current_time()
        stalled = {c.room_id: c for c in await self._store.stalled()}
        for room in list(self._asking):
            if room not in stalled:
                del self._asking[room]  # filled
                self._hole_said.cleared(room)
        for room, _cur in stalled.items():
            asking = self._asking.get(room)
            if asking is not None and asking.deadline > now:
                continue
            await self._ask(room, asking, now)

    async def _ask(self, room: str, before: _Asking | None, now: float) -> None:
        online = await self._presence()
        candidates = sorted(
            fp for fp in await self._store.members(room)
            if fp != self._keys.fingerprint and online.get(fp)
        )
        tried = before.tried if before is not None else set()
        heard: dict[str, float] = before.heard if before is not None else {}
        fresh = [fp for fp in candidates if fp not in tried]
        if not fresh:
            # Everyone had a turn: a new round, in the same order. Asking the first again and
            # again never reached the others, one of whom may have filled its own hole since
            # it refused (sim seed 1683: two members asked only each other for ever).
            tried, fresh = set(), candidates
        request_id = secrets.token_hex(8)
        deadline = now + RETRY_AFTER
        exhausted = before is not None and (before.exhausted or _exhausted(candidates, heard, now))
        if not fresh:
            if before is not None and not await self._others(room):
                await self._concede(room, "no other member")
                return
            self._asking[room] = _Asking(request_id, deadline, tried, heard, exhausted)
            say = self._hole_said.seen(room, "nobody online", now)
            if say is not None:
                log.info("room %s: memory hole, and no member online to ask yet%s", room,
                         say.note)
            return
        asked = fresh[0]
        have = (await self._store.cursor(room)).last_seq
        held = await self._store.held_from(room)
        await self._store.note_request(room, request_id, asked)
        self._asking[room] = _Asking(request_id, deadline, tried | {asked}, heard, exhausted)
        say = self._hole_said.seen(room, "asking", now)
        if say is not None:
            log.info("room %s: asking %s for a memory snapshot (%s)%s", room, asked, request_id,
                     say.note)
        try:
            op_id = await self._send_op(room, SyncRequest(request_id, have, asked, held))
        except CrosstalkError as exc:
            log.warning("room %s: snapshot request not queued: %s", room, exc.message)
            return
        self._watch(room, op_id)
        self._nursery.start_soon(self._note_heard, op_id, asked, heard)

    async def _note_heard(self, op_id: str, asked: str, heard: dict[str, float]) -> None:
        """An ask counts once the relay has sequenced it (while we are cut off it waits queued);
        a refused one never does."""
        if await self._wait_sent(op_id):
            heard.setdefault(asked, trio.current_time())

    async def _ask_for_repairs(self) -> None:
        """Ask each online member not asked yet, once per run, to repair a conceded memory."""
        repairing = await self._store.repairing()
        for room in set(self._repair_asked) - {room for room, _ in repairing}:
            del self._repair_asked[room]  # repaired, or no longer repairable
        online: dict[str, bool] | None = None
        for room, journaled in repairing:
            if journaled > JOURNAL_MAX:
                log.warning(
                    "room %s: no member repaired the memory we gave up within %d ops; "
                    "it stays without them", room, JOURNAL_MAX,
                )
                await self._store.drop_journal(room)
                continue
            online = online if online is not None else await self._presence()
            asked = self._repair_asked.setdefault(room, set())
            for fp in sorted(await self._store.members(room)):
                if fp == self._keys.fingerprint or fp in asked or not online.get(fp):
                    continue
                asked.add(fp)
                have = (await self._store.cursor(room)).last_seq
                log.info("room %s: asking %s to repair the memory we gave up", room, fp)
                request = SyncRequest(secrets.token_hex(8), have, fp, repair=True)
                try:
                    self._watch(room, await self._send_op(room, request))
                except CrosstalkError as exc:
                    log.warning("room %s: repair request not queued: %s", room, exc.message)

    # --- answering -------------------------------------------------------------------------------

    async def _others(self, room: str) -> bool:
        return any(fp != self._keys.fingerprint for fp in await self._store.members(room))

    async def _concede(self, room: str, why: str) -> None:
        log.warning("room %s: nobody can fill our memory hole (%s); giving it up", room, why)
        await self._store.concede(room)
        self._asking.pop(room, None)

    async def _may_concede(self, item: Answer) -> bool:
        """Whether we give up our hole to answer ``item`` (the rule in the module note)."""
        asking = self._asking.get(item.room)
        if asking is None or not asking.exhausted or item.held_from is None:
            return False
        ours = await self._store.held_from(item.room)
        return ours is not None and (ours, self._keys.fingerprint) < (
            item.held_from, item.requester
        )

    async def _answer(self, item: Answer) -> None:
        found = await self._store.snapshot(item.room)
        if found is None:
            async with self._ask_lock:  # not while a round of asks for this hole is under way
                if await self._may_concede(item):
                    await self._concede(item.room, f"{item.requester} missed more")
                    found = await self._store.snapshot(item.room)
        if found is None:
            log.info("room %s: asked for memory while ours has a hole; not answering", item.room)
            return
        snapshot, conceded = found
        if item.repair and conceded:
            log.info("room %s: asked to repair memory, but ours gave ops up too", item.room)
            return
        digest, pieces = pack_snapshot(snapshot)
        message = signed_message(item.room, item.request_id, snapshot.last_seq, digest)
        sig = crypto.sign(self._keys, message)
        log.info(
            "room %s: sending memory at seq %d to %s in %d pieces",
            item.room, snapshot.last_seq, item.requester, len(pieces),
        )
        for index, piece in enumerate(pieces):
            chunk = SyncChunk(
                item.request_id, snapshot.last_seq, index, len(pieces), digest, sig, piece,
                conceded,
            )
            self._watch(item.room, await self._send_op(item.room, chunk))
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


def _exhausted(candidates: list[str], heard: dict[str, float], now: float) -> bool:
    """Every online member has had an ask of ours for RETRY_AFTER (and the hole is still open)."""
    return bool(candidates) and all(
        fp in heard and heard[fp] + RETRY_AFTER <= now for fp in candidates
    )


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
    have = (await store.cursor(room)).last_seq
    try:
        op_id = await send_op(room, SyncRequest(secrets.token_hex(8), have, None))
    except CrosstalkError as exc:
        log.warning("room %s: memory probe not queued: %s", room, exc.message)
        return
    watch(room, op_id)
