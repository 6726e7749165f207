"""The room actor: one per room. Seals what we send (crosstalk.actors.room_send), opens and
applies what arrives, in order.

Inbound ops reach the store first (the relay link commits each one with its relay cursor before
acknowledging it). ``Wake`` makes this actor apply everything after its own *applied* cursor, in
sequence order: open the seal with the room key of the op's epoch, check the signature against
the roster key of its sender, then hand it to each feature's applier (messages are held, memory
ops change facts and tasks) and move the applied cursor, all in one transaction. An op that does
not open or verify is rejected, logged and skipped: it is never shown. Appliers must be
idempotent by op id, so that re-applying after a crash is harmless.

Opening and applying share that one write transaction (one store call per batch, not a read and
then a write). A batch is opened whole before anything in it applies; a large one (a catch-up)
is opened on two threads, since signature checks are C that runs without the GIL
(crosstalk.actors.room_open). A batch shorter than ``BATCH`` ends a catch-up: whatever
the link commits after our transaction began is followed by its own ``Wake``. A feature that can
work per batch brings an *apply scope* besides its applier: a context manager entered around the
appliers of each batch, inside the transaction, so that it may keep what it read for the whole
batch and write once at its end (room memory does). Appliers still see every op one by one, in
order, so a scope changes how much a batch costs, never what it does.

One way in: this actor is the only one that applies its room's ops. The relay link records what
arrives (the ops and the relay cursor, in one commit, before it acknowledges them) and rings
this room's doorbell (the router does, for a room whose actor was not running); nobody applies
for the room from outside and nobody calls this actor's methods. Durability needs nothing more:
an acknowledged op is in ``relay_inbound`` before the ack, and applying moves the *applied*
cursor in the same transaction as the appliers' writes, so a crash between the two commits
leaves ops recorded but not applied, which the next catch-up (at start, or the next ring)
applies. It costs an arriving batch a second commit: the link once applied a running room's ops
inside its own transaction, calling into this actor from another, and two owners of one cursor
is what issue 40 removed.

That second commit is not fsynced (``store.write(durable=False)``, ``synchronous=NORMAL``): a
process crash cannot undo it, and an OS crash or power loss that does leaves the applied cursor
behind ops still in ``relay_inbound`` (fsynced by the link before its ack), so the next catch-up
applies them again, in the same order, to the same result. Nothing told after it is made false
by that: whatever goes to another member (receipts, refusals, key shares, memory answers) is sent
through the outbox, whose commit is fsynced, and an fsync of the WAL makes every commit before
it durable too (the log is appended in order); the relay_inbound trim that forgets applied ops
is such a commit. What is told only on this machine (a notice shown, a waiting control request
answered) dies with it in the same crash, and comes back the same when the ops are re-applied.

Search indexes memory records after their transaction (crosstalk/store/schema_search_queue.py):
once a catch-up has applied everything there was, this actor indexes what is queued, in short
transactions of their own, and stops after one of them when its doorbell rings (the next
catch-up comes first; what is left is indexed once that is done, or by a search).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, ExitStack

import attrs
import nacl.utils
import trio

from crosstalk import crypto, sim_hooks
from crosstalk.actors import room_open
from crosstalk.actors.context import ActorContext
from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.room_send import Sender, SendOp
from crosstalk.core.room import Applied, Verdict, decide
from crosstalk.errors import RemoteProtocolError
from crosstalk.store import room_keys, room_log, search_index
from crosstalk.store.db import Store
from crosstalk.store.rooms import room_key, signing_keys
from crosstalk.wire.room_ops import (
    RoomOp,
    decode_op,
    unframe_body,
)

log = logging.getLogger(__name__)

BATCH = 200
LOOKAHEAD = 1000  # ops looked through for a missing key per wake, while held
SEND_BATCH = 64  # sends sealed and committed together, at most


@attrs.frozen
class Wake:
    """Something new may be in the store for this room."""


RoomInput = Wake | SendOp


# Applies one op inside the room's transaction; each feature (messages, memory) brings one.
Applier = Callable[[sqlite3.Connection, Applied], None]
# Told, after the transaction committed, what was applied (e.g. the attention gate).
AppliedListener = Callable[[list[Applied]], Awaitable[None]]
# Entered around the appliers of one batch, inside its transaction; left before the commit (a
# feature's per-batch caches and deferred writes). Left with the exception if an applier raised.
ApplyScope = Callable[[sqlite3.Connection], AbstractContextManager[None]]


class _Held:
    """The type of :data:`HOLD`: an op that may open later, so the batch stops before it."""


HOLD = _Held()


@attrs.frozen
class _Decided:
    """An op of the batch that is not held: to open as ``job``, or rejected (``why``)."""

    item: room_log.InboundOp
    epoch: int  # what its frame says (0 if it has none)
    job: room_open.ToOpen | None
    why: str = ""


class RoomActor:
    """Runs one room. ``me`` is our own Ed25519 public key (our other devices sign with it)."""

    def __init__(
        self,
        *,
        room_id: str,
        store: Store,
        keys: crypto.Keys,
        relay: RelayClient,
        appliers: Sequence[Applier] = (),
        on_applied: AppliedListener | None = None,
        randomness: Callable[[int], bytes] = nacl.utils.random,
        scopes: Sequence[ApplyScope] = (),
        doorbell: Doorbell | None = None,
        key_takers: Sequence[Applier] = (),
    ) -> None:
        # Rung by whoever committed something for this room; owned by the daemon, so a ring
        # during a restart is still pending when the actor is back (a Wake message rings it too).
        self._doorbell = doorbell if doorbell is not None else Doorbell()
        self._appliers = tuple(appliers)
        self._scopes = tuple(scopes)
        self._on_applied = on_applied
        self._room = room_id
        self._store = store
        self._keys = keys
        self._relay = relay
        self._random = randomness
        self._held_at: int | None = None
        self._held = False  # the last batch stopped at an op it had to hold
        # Appliers that only take room keys (rekeys, shares): safe to run ahead of the log.
        self._key_takers = tuple(key_takers)
        self._scanned: tuple[int, int] | None = None  # (held seq, looked ahead up to seq)
        self._unindexed = False  # memory records wait to be indexed for search

    async def run(
        self,
        ctx: ActorContext[RoomInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # Inbound and outbound run as separate tasks: a listener told about an applied op may
        # itself send into this room (a receipt, an automatic refusal) and wait for it; with one
        # loop that wait would be on ourselves.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._inbound, ctx)
            task_status.started()
            await self._outbound(ctx)

    async def _inbound(self, ctx: ActorContext[RoomInput]) -> None:
        while True:
            await self._catch_up(ctx)
            await self._index_for_search(ctx)
            await self._doorbell.wait()  # the outbound task beats while it waits on the inbox

    async def _outbound(self, ctx: ActorContext[RoomInput]) -> None:
        """Read the inbox: ring the doorbell for a ``Wake``, and seal and queue every send
        waiting there in one commit (crosstalk.actors.room_send)."""
        sender = Sender(self._room, self._store, self._keys, self._relay, self._random)
        while True:
            waiting = [await ctx.receive()]
            while len(waiting) < SEND_BATCH:
                try:
                    waiting.append(ctx.inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            sends = [item for item in waiting if isinstance(item, SendOp)]
            if len(sends) < len(waiting):
                self._doorbell.ring()
            if sends:
                await sender.send(sends)
                ctx.beat()

    # --- inbound ---------------------------------------------------------------------------------

    async def _catch_up(self, ctx: ActorContext[RoomInput]) -> None:
        while True:
            # Not fsynced: the ops are durable in relay_inbound already (see the module note).
            opened = await self._store.write(self.open_and_apply, durable=False)
            if opened and self._on_applied is not None:
                await self._on_applied(opened)
            ctx.beat()
            if opened and self._held:
                continue  # what we just applied (a key, a roster name) may open the held op
            if len(opened) < BATCH:
                return  # anything committed since our transaction began comes with a Wake

    def open_and_apply(self, conn: sqlite3.Connection) -> list[Applied]:
        """Open the next batch and apply it, in one transaction (``conn``'s): the whole of one
        catch-up step, public for tests that drive it without running the actor."""
        opened = self._open_pending(conn)
        if opened:
            self._apply(conn, opened=opened)
        # Whoever noted them (this batch, another room, a crash before they were indexed).
        self._unindexed = self._unindexed or search_index.unindexed(conn)
        return opened

    async def _index_for_search(self, ctx: ActorContext[RoomInput]) -> None:
        """Index the memory records the catch-up changed (every room's: one queue), a chunk at a
        time; at least one chunk per catch-up, so steady traffic cannot starve it."""
        while self._unindexed:
            # Not fsynced: the queue it empties commits with it, so a lost commit redoes it.
            taken = await self._store.write(search_index.index_records, durable=False)
            ctx.beat()
            self._unindexed = taken == search_index.CHUNK
            if self._doorbell.pending():
                return

    def _open_pending(self, conn: sqlite3.Connection) -> list[Applied]:
        """Open the next batch after the applied cursor, up to the first op we must hold: decide
        each op, open them all (a large batch on two threads: crosstalk.actors.room_open), then
        accept or reject each in order."""
        items = room_log.pending(conn, self._room, BATCH)
        # Gone members' keys stay: what they signed before they left must still verify.
        signers = signing_keys(conn, self._room)
        signers[self._keys.fingerprint] = self._keys.ed_pub  # our own other devices
        keys: dict[int, bytes | None] = {}
        newest = self._newest(conn)
        decided: list[_Decided] = []
        opened: list[Applied] = []
        for item in items:
            verdict = self._decide(conn, item, signers, keys, newest)
            if isinstance(verdict, _Held):
                # Open what came before first: taking keys from further on must not change
                # which keys those ops are tried under (room_keys.alternates).
                opened += self._open_decided(conn, decided)
                decided = []
                if self._keys_ahead(conn, item.seq, signers):
                    keys.clear()  # a key came from further on: look at this op again
                    newest = self._newest(conn)
                    verdict = self._decide(conn, item, signers, keys, newest)
            if isinstance(verdict, _Held):
                break  # later ops wait behind it: memory and claims need the log in order
            decided.append(verdict)
        opened += self._open_decided(conn, decided)
        self._held = len(opened) < len(items)
        return opened

    def _open_decided(self, conn: sqlite3.Connection, decided: list[_Decided]) -> list[Applied]:
        """Open the decided ops (on two threads if they are many), then accept or reject each,
        in order. An op that did not open under its epoch's key first takes the keys the ops
        before it in the batch bring: a rekey of an epoch we minted too brings the second key
        the ops after it were sealed under (sim seed 297: taken only when the batch was
        applied, they were dropped). Only then: the appliers' order stays the log's."""
        results = iter(room_open.open_all(self._room, [d.job for d in decided if d.job]))
        opened: list[Applied] = []
        taken = 0  # opened[:taken] had their keys taken
        for d in decided:
            item = d.item
            if d.job is None:
                self._reject(item, d.why)
                op = None
            else:
                result = next(results)
                if isinstance(result, crypto.OpenFailed):
                    for entry in opened[taken:]:
                        for taker in self._key_takers:
                            taker(conn, entry)
                    taken = len(opened)
                op = self._accept(conn, d.job, result, item)
            opened.append(Applied(
                self._room, item.seq, item.op_id, item.sender, item.relay_ts, op, d.epoch
            ))
        return opened

    def _accept(
        self,
        conn: sqlite3.Connection,
        job: room_open.ToOpen,
        result: room_open.Opened,
        item: room_log.InboundOp,
        *,
        quiet: bool = False,
    ) -> RoomOp | None:
        """The op ``result`` opened, or None (logged unless ``quiet``) for one that did not
        open, verify or parse. An op that did not open under the epoch's key is tried under
        the other keys minted for the same epoch (two members rekeyed at once:
        room_keys.take_rekeyed)."""
        if isinstance(result, crypto.OpenFailed):
            for other in room_keys.alternates(conn, self._room, job.epoch):
                again = room_open.open_one(self._room, attrs.evolve(job, key=other))
                if not isinstance(again, crypto.OpenFailed):
                    result = again
                    break
        try:
            if isinstance(result, crypto.OpenFailed):
                raise result
            return decode_op(result)
        except RemoteProtocolError as exc:
            if not quiet:
                self._reject(item, exc.message)
            return None

    def _reject(self, item: room_log.InboundOp, why: str) -> None:
        sim_hooks.probe("room.rejected")
        log.warning(
            "room %s: rejected op %s (seq %d) from %s: %s",
            self._room, item.op_id, item.seq, item.sender, why,
        )

    def _keys_ahead(self, conn: sqlite3.Connection, held: int, signers: dict[str, bytes]) -> bool:
        """Held at ``held`` for a key we lack: take room keys from the ops after it that we can
        open already. The op that brings a key may sit behind one sealed under that key (a
        share answering our own join, posted after a member's next op); waiting for it in
        order would wait for ever. Taking a key changes nothing but which ops open, so it may
        run ahead of the log. Returns whether a key was taken."""
        if not self._key_takers:
            return False
        if self._scanned is None or self._scanned[0] != held:
            self._scanned = (held, held)
        before = room_log.epochs_held(conn, self._room)
        keys: dict[int, bytes | None] = {}
        newest = self._newest(conn)
        ahead = room_log.inbound_after(conn, self._room, self._scanned[1], LOOKAHEAD)
        for item in ahead:
            verdict = self._decide(conn, item, signers, keys, newest, quiet=True)
            if isinstance(verdict, _Held) or verdict.job is None:
                continue
            result = room_open.open_one(self._room, verdict.job)
            op = self._accept(conn, verdict.job, result, item, quiet=True)
            if op is None:
                continue
            entry = Applied(self._room, item.seq, item.op_id, item.sender, item.relay_ts, op,
                            verdict.epoch)
            for taker in self._key_takers:
                taker(conn, entry)
        if room_log.epochs_held(conn, self._room) != before:
            sim_hooks.probe("room.key_taken_ahead")
            self._scanned = None  # with a new key, ops passed over before may open now
            return True
        if ahead:
            self._scanned = (held, ahead[-1].seq)  # nothing there: the next wake starts after
        return False

    def _decide(
        self,
        conn: sqlite3.Connection,
        item: room_log.InboundOp,
        signers: dict[str, bytes],
        keys: dict[int, bytes | None],
        newest: Callable[[], int],
        *,
        quiet: bool = False,
    ) -> _Decided | _Held:
        """What to do with ``item`` before opening it: open it under a key and signer, reject it
        now (it will never open), or HOLD it (it may open once we know more: a sender the
        roster has not brought yet, or an epoch whose key no rekey has brought yet). Holding
        never drops: the op waits for the next wake."""
        try:
            epoch, sealed = unframe_body(item.body)
        except RemoteProtocolError as exc:
            return _Decided(item, 0, None, exc.message)
        if epoch not in keys:
            keys[epoch] = room_key(conn, self._room, epoch)
        key, signer = keys[epoch], signers.get(item.sender)
        decision = decide(  # the newest epoch matters only without a key: read it only then
            epoch=epoch, key_known=key is not None, newest_epoch=0 if key is not None else newest(),
            sender_known=signer is not None,
        )
        if decision.verdict is Verdict.HOLD:
            if not quiet:
                self._note_hold(item, decision.why)
            return HOLD
        if key is None or signer is None:
            return _Decided(item, epoch, None, decision.why)
        return _Decided(item, epoch, room_open.ToOpen(key, sealed, signer, epoch, item.op_id))

    def _newest(self, conn: sqlite3.Connection) -> Callable[[], int]:
        """The room's newest key epoch, read on first call (most batches never need it)."""
        return functools.cache(lambda: room_log.newest_epoch(conn, self._room))

    def _note_hold(self, item: room_log.InboundOp, why: str) -> None:
        if self._held_at != item.seq:  # once per held op, not once per wake
            self._held_at = item.seq
            log.warning(
                "room %s: holding op %s (seq %d) from %s: %s",
                self._room, item.op_id, item.seq, item.sender, why,
            )

    def _apply(self, conn: sqlite3.Connection, *, opened: list[Applied]) -> None:
        with ExitStack() as scopes:
            for scope in self._scopes:
                scopes.enter_context(scope(conn))
            for entry in opened:
                for applier in self._appliers:
                    applier(conn, entry)
        last = opened[-1].seq
        room_log.advance_applied(conn, self._room, last)
