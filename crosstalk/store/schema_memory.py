"""Tables for room memory (migration step 3; read by crosstalk/store/memory.py).

Each room's memory is kept as its :class:`~crosstalk.wire.memory.MemorySnapshot` split into rows:
one row per fact, task, decision and op outcome, each holding that record's canonical JSON, plus
one row per room with the memory cursor (``last_seq``). Applying one op rewrites only the rows it
touched; loading a room reassembles the snapshot and calls ``MemoryState.from_snapshot``.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    # Where each room's memory stands. `hole_from` is set while ops the relay no longer holds are
    # missing (ops after the hole wait in memory_pending); `request_id`/`asked`/`requested_at`
    # describe our open snapshot request for that hole.
    """CREATE TABLE memory_rooms (
        room_id TEXT PRIMARY KEY REFERENCES rooms (room_id) ON DELETE CASCADE,
        last_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
        hole_from INTEGER,
        request_id TEXT,
        asked TEXT,
        requested_at REAL
    )""",
    # Facts, tasks and decisions: one canonical-JSON record per row.
    """CREATE TABLE memory_records (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        kind TEXT NOT NULL CHECK (kind IN ('fact', 'task', 'decision')),
        record_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (room_id, kind, record_id)
    )""",
    # The outcome of every memory op applied (claims answer won/lost from here).
    """CREATE TABLE memory_outcomes (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        op_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (room_id, op_id)
    )""",
    # Memory ops we sent, in plaintext: the relay never echoes our own op back to us, so we
    # apply it ourselves at the seq the relay gave it (outbox.seq). A row is deleted once the
    # op's outcome is applied and reported.
    """CREATE TABLE memory_sent (
        op_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    # Ops after a hole, waiting for a snapshot; `body` is the memory envelope JSON, or NULL for
    # an op that is not a memory op (it only holds its seq).
    """CREATE TABLE memory_pending (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        op_id TEXT NOT NULL,
        sender TEXT NOT NULL,
        relay_ts REAL NOT NULL,
        body TEXT,
        PRIMARY KEY (room_id, seq)
    )""",
    # Pieces of a snapshot answering our open request, per responder.
    """CREATE TABLE memory_chunks (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        request_id TEXT NOT NULL,
        responder TEXT NOT NULL,
        idx INTEGER NOT NULL,
        count INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        digest BLOB NOT NULL,
        sig BLOB NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (room_id, request_id, responder, idx)
    )""",
    # Our own op at a given seq is looked up for every op applied (outbox is the link's table).
    "CREATE INDEX memory_outbox_by_seq ON outbox (room_id, seq)",
)

# Migration step 16: a hole given up (conceded) may have held ops a member offline at the time
# still has. `conceded` says our memory lacks ops it gave up (ours, or those of the member whose
# snapshot we installed); from `journal_from` on, every seq's op stays in memory_pending (the
# journal) so a complete member's snapshot can be installed under it later
# (crosstalk/store/memory_log.py, "Repair").
STATEMENTS_V16: tuple[str, ...] = (
    "ALTER TABLE memory_rooms ADD COLUMN conceded INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE memory_rooms ADD COLUMN journal_from INTEGER",
)

# Migration step 21: file reservations (crosstalk/core/reservations.py), part of each room's
# memory. `reservation_books` is where a room's book stands (its last input's seq and the relay
# clock it reached); `reservation_held` one row per reservation that holds (few: it is rewritten
# whole when the book changes); `reservation_outcomes` what each reservation op did, per op.
# The outbox keeps the relay's time for our own posts, which reservations lapse by.
STATEMENTS_V21: tuple[str, ...] = (
    "ALTER TABLE outbox ADD COLUMN relay_ts REAL NOT NULL DEFAULT 0",
    """CREATE TABLE reservation_books (
        room_id TEXT PRIMARY KEY REFERENCES rooms (room_id) ON DELETE CASCADE,
        last_seq INTEGER NOT NULL,
        clock REAL NOT NULL
    )""",
    """CREATE TABLE reservation_held (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        reservation_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (room_id, reservation_id)
    )""",
    """CREATE TABLE reservation_outcomes (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        op_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (room_id, op_id)
    )""",
)
