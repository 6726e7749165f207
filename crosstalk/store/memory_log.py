"""Following a room's log into its memory: our own ops, holes, pending ops and snapshots.

Theory of operation
-------------------
``MemoryState`` must see every seq of the room log exactly once, in order (memory ops applied,
everything else skipped). The room actor hands each applier only the ops it *received*, and two
kinds of seq never arrive that way:

* **our own ops.** The relay pushes an op to every connection but the one that posted it, so we
  apply our own at the seq the relay answered (``outbox.seq``), from the plaintext kept in
  ``memory_sent``. :meth:`MemoryFollower.advance` does it when a post is sequenced; the applier
  does it too whenever it finds our ops in front of an inbound one.
* **ops the relay no longer holds** (we were away past its retention, or joined after the room's
  first ops: the relay starts a new member at the head). Then there is a *hole*: the room's
  ``hole_from`` is set, every later op is parked in ``memory_pending``, and the memory-sync actor
  asks a member for a snapshot. When all the pieces of a signed snapshot covering the hole have
  arrived (``SyncChunk`` ops, taken by :meth:`MemoryFollower.applied` in the room transaction),
  it is verified and installed, and the parked ops after it are applied in order. A hole that
  no member can fill is given up instead (:meth:`MemoryFollower.concede`, when the memory-sync
  machine decides, ``core/memory_sync``): the seqs before the first one we hold count as no
  memory op, and the parked ops apply up to the next gap, which is a new hole.

How a hole is seen: an inbound op at seq N when memory is at L < N-1 and the seqs between are not
ours; or our own op sequenced at N while nothing between L and N is held by the relay link (the
link commits every inbound op before it reports a later post of ours as sequenced, because the
relay answers on one connection in order). A daemon back after a long absence posts a probe
(``SyncRequest`` with nobody asked) so that a hole shows even when nobody else writes.

All of this runs inside the store's write transactions, one at a time, so :class:`MemoryFollower`
keeps a cache of loaded states, checked against the stored cursor on every use: a transaction
that rolled back leaves the stored cursor behind the cached one, and the state is reloaded.

Batches: the room actor enters :meth:`MemoryFollower.batch` around the appliers of each batch
(its apply scope). Inside it, the common case (no hole, no snapshot piece, the op is next once our
own ops before it are in) reads the cursor and our sequenced ops once per room and batch, applies
to the state in memory and only notes what changed; leaving the scope writes each touched record
once, every outcome and the cursor, in the same transaction. Any other case first writes what is
noted, then runs the one-op path below, so holes, parking and snapshots behave exactly as without
a batch. If an applier raises, the transaction rolls back and the states the batch touched are
dropped from the cache.

Repair
------
A hole given up may have held ops that a member offline at the time still has (sim seed 146:
the room's creator was cut off while the others conceded, and kept a fact they never got). So a
conceded memory stays *conceded* (it says so in the snapshots it sends, and a member installing
such a snapshot becomes conceded too) and keeps a *journal*: from ``journal_from`` on, every seq's
op stays in ``memory_pending`` after it is applied (a ``NULL`` body for ops that are not memory
ops, our own included). When a complete member's snapshot arrives (one not conceded, asked for by
the memory-sync actor, or by another conceded member: every member sees the pieces), it is
installed exactly as one filling a hole, and the journal after it is applied on top, so every
replica ends with the complete member's memory plus the same ops after it. A new hole ends the
journal (the snapshot that fills it decides anew); the actor drops a journal past its bound.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from crosstalk import crypto, sim_hooks
from crosstalk.core.memory import MemoryState
from crosstalk.core.memory_transfer import MAX_CHUNKS, signed_message, unpack_snapshot
from crosstalk.core.room import Applied
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.store import memory as m
from crosstalk.store.rooms import members
from crosstalk.wire.memory import OpContext
from crosstalk.wire.room_ops import MemoryEnvelope, Rekey, RoomOp, SyncChunk, encode_op

log = logging.getLogger(__name__)


class _Noted:
    """One room's state inside a batch, and what applying ops to it changed but is not written."""

    def __init__(self, state: MemoryState, own: dict[int, m.OwnOp]) -> None:
        self.state = state
        self.own = own  # our sequenced ops after the state's last_seq when the batch began
        self.records: dict[tuple[str, str], None] = {}  # (kind, record_id), ordered, once each
        self.op_ids: list[str] = []
        self.moved = False  # last_seq moved

    def write(self, conn: sqlite3.Connection) -> None:
        if self.moved:
            m.save_batch(conn, self.state, self.records, self.op_ids)


class MemoryFollower:
    """Applies rooms' logs to their memory; ``me`` is our fingerprint."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._cache: dict[str, MemoryState] = {}
        self._batch: sqlite3.Connection | None = None  # the transaction of the open batch
        self._noted: dict[str, _Noted] = {}

    @contextmanager
    def batch(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Apply scope: defer this transaction's memory writes to its end (see the module note)."""
        if self._batch is not None:
            raise LocalProtocolError("a memory batch is already open")
        self._batch = conn
        try:
            yield
            for noted in self._noted.values():
                noted.write(conn)
        except BaseException:
            for room in self._noted:
                self._cache.pop(room, None)  # ahead of what the rollback leaves stored
            raise
        finally:
            self._batch = None
            self._noted = {}

    def state(self, conn: sqlite3.Connection, room_id: str) -> MemoryState:
        """The room's current state (cached; reloaded when the stored cursor disagrees)."""
        return self._state(conn, m.cursor(conn, room_id))

    def _state(self, conn: sqlite3.Connection, stored: m.MemoryCursor) -> MemoryState:
        cached = self._cache.get(stored.room_id)
        if cached is None or cached.last_seq != stored.last_seq:
            cached = self._cache[stored.room_id] = m.load_state(conn, stored.room_id)
        return cached

    # --- inputs ----------------------------------------------------------------------------------

    def applied(self, conn: sqlite3.Connection, entry: Applied) -> None:
        """Applier: one op of the room log, in the room's transaction."""
        room = entry.room_id
        if self._batch is conn:
            if self._noted_fast(conn, entry):
                return
            noted = self._noted.pop(room, None)
            if noted is not None:
                noted.write(conn)  # the one-op path below reads what the batch noted
        if isinstance(entry.op, SyncChunk):
            self._take_chunk(conn, entry, entry.op)
        stored = m.cursor(conn, room)
        state = self._state(conn, stored)
        if stored.hole_from is not None:
            if entry.seq > state.last_seq:
                _park(conn, entry)
            return
        if entry.seq <= state.last_seq:
            return  # re-delivered, our own op echoed on a resume, or covered by a snapshot
        self._fill_own(conn, state, entry.seq - 1)
        if state.last_seq < entry.seq - 1:
            log.info("room %s: memory hole from seq %d to %d", room, state.last_seq + 1, entry.seq)
            m.set_hole(conn, room, state.last_seq + 1)
            _park(conn, entry)
            return
        self._apply_one(conn, state, entry.seq, entry.op_id, entry.sender, entry.relay_ts, entry.op)
        self._fill_own(conn, state, None)

    def advance(self, conn: sqlite3.Connection, room_id: str) -> None:
        """Apply our own sequenced ops that come next; mark a hole if ops before them are gone."""
        if m.cursor(conn, room_id).hole_from is not None:
            return
        state = self.state(conn, room_id)
        self._fill_own(conn, state, None)
        if m.own_ops_after(conn, room_id, state.last_seq) is None:
            return
        missing = state.last_seq + 1
        if m.inbound_at(conn, room_id, missing) is not False:  # not held, or passed us by
            log.info("room %s: memory hole from seq %d (seen by our own op)", room_id, missing)
            m.set_hole(conn, room_id, missing)

    def held_from(self, conn: sqlite3.Connection, room_id: str) -> int | None:
        """The first seq after the room's hole that we hold (parked or our own); None: no hole.

        Two members that both have a hole compare it: the lower one has missed less.
        """
        cursor = m.cursor(conn, room_id)
        if cursor.hole_from is None:
            return None
        parked = m.first_parked(conn, room_id)
        held = [*m.own_ops_from(conn, room_id, cursor.last_seq), *([parked] if parked else [])]
        return min(held, default=None)

    def concede(self, conn: sqlite3.Connection, room_id: str) -> None:
        """Give up the room's hole: nobody can fill it, so its seqs count as holding no memory op.

        The ops parked after it are applied in order, skipping the seqs before the first one we
        hold, so the memory moves on instead of waiting for ever; a later gap is a new hole
        (those ops are not given up). Members that still have a hole take a snapshot of the
        result (the memory-sync machine decides who concedes; see there).
        """
        cursor = m.cursor(conn, room_id)
        if cursor.hole_from is None:
            return
        state = self._state(conn, cursor)
        held = self.held_from(conn, room_id)
        log.warning(
            "room %s: memory gives up the ops from seq %d that no member holds",
            room_id, cursor.hole_from,
        )
        m.set_hole(conn, room_id, None)
        # Journal from the first op we hold: the seqs before it are the ones given up.
        m.set_conceded(conn, room_id, True, held if held is not None else cursor.hole_from)
        conn.execute("DELETE FROM memory_chunks WHERE room_id = ?", (room_id,))
        self._drain_parked(conn, state, skip_to=held)
        self.advance(conn, room_id)  # our own ops past a later gap: that gap is a hole too

    # --- internals -------------------------------------------------------------------------------

    def _drain_parked(
        self, conn: sqlite3.Connection, state: MemoryState, *, skip_to: int | None
    ) -> None:
        """Apply the ops parked after ``state.last_seq``, in order, and our own ops among them.

        A seq before ``skip_to`` that nobody holds is skipped (the hole given up); at any other
        gap the hole is marked again from there and the rest stays parked (a snapshot that
        still falls short, or ops we missed after the hole while we were out of the room, which
        members hold: sim seed 127, a member that conceded skipped its own removal and every
        replica installed its memory).
        """
        room = state.room_id
        rows = conn.execute(
            "SELECT seq, op_id, sender, relay_ts, body FROM memory_pending "
            "WHERE room_id = ? AND seq > ? ORDER BY seq",
            (room, state.last_seq),
        ).fetchall()
        conn.execute("DELETE FROM memory_pending WHERE room_id = ?", (room,))
        for seq, op_id, sender, relay_ts, body in rows:
            self._fill_own(conn, state, seq - 1)
            while skip_to is not None and state.last_seq < min(seq, skip_to) - 1:
                self._apply_one(conn, state, state.last_seq + 1, "", "", 0.0, None)
                self._fill_own(conn, state, seq - 1)
            if state.last_seq < seq - 1:
                m.set_hole(conn, room, state.last_seq + 1)  # still short: ask again
                for row in rows:
                    if row[0] >= seq:
                        _park_row(conn, room, row)
                return
            op = m.parse_envelope(body) if body is not None else None
            self._apply_one(conn, state, seq, op_id, sender, relay_ts, op)
        last_own = m.own_ops_after(conn, room, state.last_seq)
        end = min(last_own, skip_to) if last_own is not None and skip_to is not None else None
        while end is not None and state.last_seq < end - 1:
            self._fill_own(conn, state, end - 1)
            if state.last_seq < end - 1:
                self._apply_one(conn, state, state.last_seq + 1, "", "", 0.0, None)
        self._fill_own(conn, state, None)

    def _noted_fast(self, conn: sqlite3.Connection, entry: Applied) -> bool:
        """Apply ``entry`` in memory, noting what to write, if it is the common case."""
        if isinstance(entry.op, SyncChunk):
            return False
        noted = self._noted.get(entry.room_id)
        if noted is None:
            stored = m.cursor(conn, entry.room_id)
            if stored.hole_from is not None or stored.journal_from is not None:
                return False
            state = self._state(conn, stored)
            noted = _Noted(state, m.own_ops_from(conn, entry.room_id, state.last_seq))
            self._noted[entry.room_id] = noted
        state = noted.state
        if entry.seq <= state.last_seq:
            return True  # re-delivered, our own op echoed on a resume, or covered by a snapshot
        self._note_own(conn, noted, entry.seq - 1)
        if state.last_seq < entry.seq - 1:
            return False  # a hole: the one-op path marks it and parks the op
        self._note_one(noted, entry.seq, entry.op_id, entry.sender, entry.relay_ts, entry.op)
        self._note_own(conn, noted, None)
        return True

    def _note_one(
        self,
        noted: _Noted,
        seq: int,
        op_id: str,
        sender: str,
        relay_ts: float,
        op: RoomOp | None,
    ) -> None:
        """:meth:`_apply_one`, with the writes noted for the end of the batch."""
        state = noted.state
        if seq <= state.last_seq:
            return
        if isinstance(op, MemoryEnvelope):
            state.apply(op.op, _context(seq, op_id, sender, relay_ts, op))
            noted.records[m.touched(op.op)] = None
            noted.op_ids.append(op_id)
        elif isinstance(op, Rekey):
            state.member_left(op.removed, seq, relay_ts)
            noted.records[m.BOOK] = None
        else:
            state.skip(seq)
        noted.moved = True

    def _note_own(self, conn: sqlite3.Connection, noted: _Noted, upto: int | None) -> None:
        """:meth:`_fill_own` from the ops the batch loaded."""
        state = noted.state
        while upto is None or state.last_seq < upto:
            seq = state.last_seq + 1
            own = noted.own.get(seq)
            if own is None:
                return
            envelope = m.sent_envelope(conn, own.op_id)  # None: a message or sync op of ours
            self._note_one(noted, seq, own.op_id, self.me, own.relay_ts, envelope)

    def _apply_one(
        self,
        conn: sqlite3.Connection,
        state: MemoryState,
        seq: int,
        op_id: str,
        sender: str,
        relay_ts: float,
        op: RoomOp | None,
    ) -> None:
        if seq <= state.last_seq:
            return
        if isinstance(op, MemoryEnvelope):
            state.apply(op.op, _context(seq, op_id, sender, relay_ts, op))
            m.save_applied(conn, state, op.op, op_id)
        elif isinstance(op, Rekey):
            state.member_left(op.removed, seq, relay_ts)
            m.save_batch(conn, state, [m.BOOK], [])
        else:
            state.skip(seq)
            m.set_last_seq(conn, state.room_id, state.last_seq)
        start = m.journal_from(conn, state.room_id)
        if start is not None and seq >= start:
            _park_row(conn, state.room_id, _row(seq, op_id, sender, relay_ts, op))

    def _fill_own(self, conn: sqlite3.Connection, state: MemoryState, upto: int | None) -> None:
        """Apply our own sequenced ops from ``last_seq + 1`` on, while there are some."""
        while upto is None or state.last_seq < upto:
            seq = state.last_seq + 1
            own = m.own_op_at(conn, state.room_id, seq)
            if own is None:
                return
            envelope = m.sent_envelope(conn, own.op_id)  # None: a message or sync op of ours
            self._apply_one(conn, state, seq, own.op_id, self.me, own.relay_ts, envelope)

    def _take_chunk(self, conn: sqlite3.Connection, entry: Applied, chunk: SyncChunk) -> None:
        room = entry.room_id
        wanted = m.cursor(conn, room)
        if wanted.hole_from is not None and chunk.request_id == wanted.request_id:
            # The snapshot must reach past the hole.
            needed = (m.first_parked(conn, room) or wanted.hole_from) - 1
        elif wanted.journal_from is not None and not chunk.conceded:
            needed = wanted.journal_from - 1  # a repair: the journal must take over from it
        else:
            return  # not ours, or no longer needed
        if not (0 <= chunk.index < chunk.count <= MAX_CHUNKS) or not (
            needed <= chunk.last_seq < entry.seq
        ):
            log.warning("room %s: snapshot piece from %s does not fit; ignored", room, entry.sender)
            return
        conn.execute(
            "INSERT OR IGNORE INTO memory_chunks (room_id, request_id, responder, idx, count, "
            "last_seq, digest, sig, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (room, chunk.request_id, entry.sender, chunk.index, chunk.count, chunk.last_seq,
             chunk.digest, chunk.sig, chunk.data),
        )
        rows = conn.execute(
            "SELECT idx, count, last_seq, digest, sig, data FROM memory_chunks "
            "WHERE room_id = ? AND request_id = ? AND responder = ? ORDER BY idx",
            (room, chunk.request_id, entry.sender),
        ).fetchall()
        if len(rows) < chunk.count:
            return
        try:
            state = self._verified(conn, entry, chunk, rows)
        except RemoteProtocolError as exc:
            log.warning("room %s: snapshot from %s refused: %s", room, entry.sender, exc.message)
            conn.execute(
                "DELETE FROM memory_chunks WHERE room_id = ? AND responder = ?",
                (room, entry.sender),
            )
            return
        self._install(conn, state, conceded=chunk.conceded)

    def _verified(
        self,
        conn: sqlite3.Connection,
        entry: Applied,
        chunk: SyncChunk,
        rows: list[tuple[int, int, int, bytes, bytes, bytes]],
    ) -> MemoryState:
        head = (chunk.count, chunk.last_seq, chunk.digest, chunk.sig)
        if [r[0] for r in rows] != list(range(chunk.count)) or any(
            (r[1], r[2], bytes(r[3]), bytes(r[4])) != head for r in rows
        ):
            raise RemoteProtocolError("its pieces disagree with each other")
        key = next(
            (x.signing_key for x in members(conn, entry.room_id, with_gone=True)
             if x.fingerprint == entry.sender),
            None,
        )
        if key is None:
            raise RemoteProtocolError("its sender is not a member of the room")
        message = signed_message(entry.room_id, chunk.request_id, chunk.last_seq, chunk.digest)
        crypto.verify(key, message, chunk.sig)
        snapshot = unpack_snapshot(entry.room_id, [bytes(r[5]) for r in rows], chunk.digest)
        if snapshot.last_seq != chunk.last_seq:
            raise RemoteProtocolError("its last_seq differs from the one it was signed with")
        return MemoryState.from_snapshot(snapshot)

    def _install(self, conn: sqlite3.Connection, state: MemoryState, *, conceded: bool) -> None:
        """Install a verified snapshot; ``conceded``: its sender's memory gave a hole up, so ours
        lacks those ops too from now on and journals, to be repaired in turn."""
        room = state.room_id
        sim_hooks.probe("memory.snapshot_installed")
        log.info(
            "room %s: memory snapshot installed at seq %d%s",
            room, state.last_seq, " (one that gave ops up)" if conceded else "",
        )
        m.replace_all(conn, state)
        self._cache[room] = state
        conn.execute("DELETE FROM memory_chunks WHERE room_id = ?", (room,))
        m.set_hole(conn, room, None)
        m.set_conceded(conn, room, conceded, state.last_seq + 1 if conceded else None)
        self._drain_parked(conn, state, skip_to=None)


def _context(seq: int, op_id: str, sender: str, relay_ts: float, op: MemoryEnvelope) -> OpContext:
    return OpContext(
        seq=seq, op_id=op_id, sender=sender, sender_label=op.label or sender,
        ts=op.at or relay_ts, relay_ts=relay_ts,
    )


def _park(conn: sqlite3.Connection, entry: Applied) -> None:
    row = _row(entry.seq, entry.op_id, entry.sender, entry.relay_ts, entry.op)
    _park_row(conn, entry.room_id, row)


def _row(
    seq: int, op_id: str, sender: str, relay_ts: float, op: RoomOp | None
) -> tuple[int, str, str, float, str | None]:
    """A memory_pending row: the op's memory envelope as JSON, a removal as whom it removed
    (its sealed keys are not memory's), or None for any other op."""
    if isinstance(op, Rekey):
        op = Rekey(op.epoch, op.removed, {})
    body = encode_op(op).decode() if isinstance(op, MemoryEnvelope | Rekey) else None
    return (seq, op_id, sender, relay_ts, body)


def _park_row(
    conn: sqlite3.Connection, room: str, row: tuple[int, str, str, float, str | None]
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO memory_pending (room_id, seq, op_id, sender, relay_ts, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (room, *row),
    )
