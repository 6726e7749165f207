"""Schema versions of ``state.db`` and the steps between them.

Theory of operation: the schema version is SQLite's ``PRAGMA user_version`` (an integer in the file
header, 0 for a new database). ``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``.
Opening the store runs every pending step in order, each in its own ``BEGIN IMMEDIATE`` transaction
that also sets ``user_version``; ``user_version`` is part of the database header, so it commits or
rolls back together with the step's tables. A crash mid-migration therefore leaves the database at
the last completed version and the next start carries on. A new database skips the replay: it gets
the schema all the steps make (:mod:`crosstalk.store.schema_now`, generated and checked by
:mod:`crosstalk.store.schema_snapshot`) in one transaction, then any step newer than that. A
database whose version is newer than any step we know was written by a newer crosstalk: we refuse
it (DamagedState) rather than guess.

Rules for later work: never edit a released step; append a new one. Statements are executed one at
a time with ``execute`` (not ``executescript``, which commits behind our back).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import attrs

from crosstalk.errors import DamagedState, LocalProtocolError
from crosstalk.store import (
    ids,
    schema_attention,
    schema_compact,
    schema_disk,
    schema_edits,
    schema_hot,
    schema_lean,
    schema_memory,
    schema_messages,
    schema_now,
    schema_presence,
    schema_receipts,
    schema_search,
    schema_search_queue,
    schema_threads,
    schema_ui,
)


@attrs.frozen
class Migration:
    """One step: the statements that take the schema to ``version``."""

    version: int
    summary: str
    statements: Sequence[str]


# Version 1: what DESIGN.md §4 says must survive a restart, kept minimal. Op logs, facts/tasks,
# trust/mutes, attention and usage arrive as later steps, written by the code that uses them.
_V1 = (
    # Daemon-wide settings: JSON values by key (relay URL, pinned relay keys, ...).
    """CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    # People (and our own other machines) we have paired with; keys as raw 32-byte values.
    """CREATE TABLE contacts (
        fingerprint TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        machine TEXT NOT NULL DEFAULT '',
        signing_key BLOB NOT NULL CHECK (length(signing_key) = 32),
        box_key BLOB NOT NULL CHECK (length(box_key) = 32),
        is_agent INTEGER NOT NULL DEFAULT 0,
        own_machine INTEGER NOT NULL DEFAULT 0,
        added_at REAL NOT NULL
    )""",
    "CREATE INDEX contacts_by_label ON contacts (label)",
    # Rooms we are in or invited to; `epoch` is the current key epoch.
    """CREATE TABLE rooms (
        room_id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('direct', 'shared')),
        state TEXT NOT NULL CHECK (state IN ('invited', 'joined', 'left')),
        epoch INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
    # Each room's roster as we last verified it: the keys that ops from a sender must match.
    """CREATE TABLE room_members (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        fingerprint TEXT NOT NULL,
        label TEXT NOT NULL,
        signing_key BLOB NOT NULL CHECK (length(signing_key) = 32),
        box_key BLOB NOT NULL CHECK (length(box_key) = 32),
        state TEXT NOT NULL CHECK (state IN ('invited', 'member')),
        added_by TEXT,
        PRIMARY KEY (room_id, fingerprint)
    )""",
    # Room keys by epoch: old epochs stay so that late ops sealed under them still open.
    """CREATE TABLE room_keys (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        key BLOB NOT NULL CHECK (length(key) = 32),
        PRIMARY KEY (room_id, epoch)
    )""",
    # The highest relay sequence number committed locally per room: sent on reconnect, acked.
    """CREATE TABLE room_cursors (
        room_id TEXT PRIMARY KEY REFERENCES rooms (room_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL DEFAULT 0 CHECK (seq >= 0)
    )""",
    # Ops we have applied, by id: re-delivery of the same op is a no-op (exactly-once at the agent).
    """CREATE TABLE room_ops (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        op_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        sender TEXT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        received_at REAL NOT NULL,
        PRIMARY KEY (room_id, op_id)
    )""",
    "CREATE INDEX room_ops_by_seq ON room_ops (room_id, seq)",
    # Sealed ops waiting for the relay; a send returns once its row is committed here.
    # `id` gives the flush order; `seq` is filled when the relay has sequenced it ('sent').
    """CREATE TABLE outbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        op_id TEXT NOT NULL UNIQUE,
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        frame BLOB NOT NULL,
        state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sent')),
        seq INTEGER,
        created_at REAL NOT NULL
    )""",
    # Messages held for agents: for a named session, for a project, or (both NULL) for anyone
    # reading as this identity. `read_at` stays NULL until an agent actually read it.
    """CREATE TABLE held_messages (
        message_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL,
        sender TEXT NOT NULL,
        target_session TEXT,
        target_project TEXT,
        intent TEXT NOT NULL CHECK (intent IN ('fyi', 'question', 'blocking')),
        body TEXT NOT NULL,
        received_at REAL NOT NULL,
        read_at REAL
    )""",
    "CREATE INDEX held_messages_unread ON held_messages (read_at, received_at)",
    # Agent sessions attached to this daemon (they outlive a daemon restart as records).
    """CREATE TABLE sessions (
        name TEXT PRIMARY KEY,
        client TEXT NOT NULL,
        project TEXT NOT NULL DEFAULT '',
        pid INTEGER,
        inbox_socket TEXT,
        status TEXT NOT NULL DEFAULT 'live',
        registered_at REAL NOT NULL,
        last_seen REAL NOT NULL
    )""",
)

# Version 2: the relay link's own bookkeeping (crosstalk/actors/relay_link.py). No foreign key to
# `rooms`: the link learns of a room (a create/accept reply, a first op) before the room actor may
# have recorded it, and must still resume it and commit its ops before acknowledging them.
_V2 = (
    # Per room, the highest relay seq committed here; sent in `resume`, acknowledged with `ack`.
    """CREATE TABLE relay_cursors (
        room_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL DEFAULT 0 CHECK (seq >= 0)
    )""",
    # Inbound sealed ops, committed (with the cursor, in one transaction) before the `ack`. The
    # durable hand-off to the room actors: a row here not yet in `room_ops` is still to apply.
    """CREATE TABLE relay_inbound (
        room_id TEXT NOT NULL,
        op_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        sender TEXT NOT NULL,
        body BLOB NOT NULL,
        relay_ts REAL NOT NULL,
        received_at REAL NOT NULL,
        PRIMARY KEY (room_id, op_id)
    )""",
    "CREATE INDEX relay_inbound_by_seq ON relay_inbound (room_id, seq)",
)

_V6 = ("ALTER TABLE sessions ADD COLUMN transcript_path TEXT",)

# Version 7: membership follows the relay's roster (crosstalk/features/membership/). A member who
# left or was removed stays as a `gone` row, so the ops they signed before going still verify;
# `named` says where a member's label came from (0: a placeholder, 1: whoever added them, 2: the
# member themselves); a room we were removed from keeps who removed us and when.
_V7 = (
    "ALTER TABLE room_members ADD COLUMN gone INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE room_members ADD COLUMN named INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE rooms ADD COLUMN removed_by TEXT",
    "ALTER TABLE rooms ADD COLUMN removed_at REAL",
)

# Version 14: two members removing at once both mint the next epoch; every member keeps each key
# minted for an epoch (the first it took stays the one it seals with) and opens with either, and
# remembers which keys it minted itself (crosstalk/features/membership/rekey.py).
_V14 = (
    """CREATE TABLE room_key_alternates (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        epoch INTEGER NOT NULL,
        key BLOB NOT NULL CHECK (length(key) = 32),
        PRIMARY KEY (room_id, epoch, key)
    )""",
    "ALTER TABLE room_keys ADD COLUMN minted INTEGER NOT NULL DEFAULT 0",
)

# Version 15: a joiner owes the room its own name (``MemberNamed``), which is also how members
# holding newer keys learn to share them; owed from the commit that marks the room joined until
# the commit that queues the op, so a crash in between is finished at the next link-up
# (crosstalk/features/membership/lifecycle.py).
_V15 = ("ALTER TABLE rooms ADD COLUMN name_owed INTEGER NOT NULL DEFAULT 0",)
# A room created here whose creation the relay has not confirmed yet: only such a room is created
# again at link-up when the relay does not know it (a confirmed one it does not know was deleted
# there, by our own leave racing the link-up: the simulation's seed 800).
_V17 = ("ALTER TABLE rooms ADD COLUMN create_pending INTEGER NOT NULL DEFAULT 0",)
# Who invited us to a room still pending, and the named room the invitation came through (NULL:
# our room of two with them), so `crosstalk room` can say "from carl via #team".
_V24 = (
    "ALTER TABLE rooms ADD COLUMN invited_by TEXT",
    "ALTER TABLE rooms ADD COLUMN invited_via TEXT",
)
# The epoch of the key our invitation brought: a joiner who sees a removal after its invitation
# and still holds no newer key must not mint the next epoch from that one (sim seed 7 of
# REJOINED_WITH_A_HOLE: two epoch-1 keys, and nothing opened either way after).
_V30 = ("ALTER TABLE rooms ADD COLUMN invited_epoch INTEGER",)
# Newer room keys owed to a joiner who named itself under an older epoch, written in the
# transaction that applies its MemberNamed and cleared with the last KeyShare's outbox commit:
# sent after that commit, a crash in between lost them for good (the simulation's seed 297).
_V18 = (
    """CREATE TABLE key_shares_owed (
        room_id TEXT NOT NULL REFERENCES rooms (room_id) ON DELETE CASCADE,
        joiner TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        PRIMARY KEY (room_id, joiner)
    )""",
)

# An outbox row whose op carries keys (a rekey, a key share, a joiner naming itself): it goes
# under the epoch it was sealed for even once the room shows a newer one, and may pass the room's
# posts that wait to be sealed anew (crosstalk/core/link/outbox.py; the simulation's seed 2877).
_V19 = ("ALTER TABLE outbox ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0",)

# The membership history each room's roster is derived from (crosstalk/wire/chain.py), and what a
# relay offered that did not verify (shown by `crosstalk room` and the page).
_V20 = (
    """CREATE TABLE membership_chain (
        room_id TEXT NOT NULL REFERENCES rooms(room_id),
        idx INTEGER NOT NULL,
        link BLOB NOT NULL,
        stmt TEXT NOT NULL,
        PRIMARY KEY (room_id, idx)
    )""",
    """CREATE TABLE membership_alarms (
        room_id TEXT PRIMARY KEY REFERENCES rooms(room_id),
        at REAL NOT NULL,
        reason TEXT NOT NULL
    )""",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", _V1),
    Migration(2, "relay link cursors and inbound ops", _V2),
    Migration(3, "room memory: facts, tasks, decisions", schema_memory.STATEMENTS),
    Migration(4, "attention: trust, mutes, rations, the record", schema_attention.STATEMENTS),
    Migration(5, "messages: sessions, delivery states, slices", schema_messages.STATEMENTS),
    # Sessions remember their client's transcript (from the hook), for `--slice turns`.
    Migration(6, "sessions: transcript path", _V6),
    Migration(7, "membership: gone members, label sources, removed rooms", _V7),
    # Refused posts keep the relay's reason; notices are withdrawn once their message is read.
    Migration(8, "messages: refused posts, withdrawn notices", schema_messages.STATEMENTS_V8),
    # What roommates published about their agent sessions (crosstalk/features/presence/).
    Migration(9, "presence: peer sessions", schema_presence.STATEMENTS),
    # Threads: our side of each thread, and closed threads' summaries (crosstalk/features/threads/).
    Migration(10, "threads: sent thread and text, closed threads", schema_threads.STATEMENTS),
    # Every per-event query bounded by pending work, not history (crosstalk/store/schema_hot.py).
    Migration(11, "indexes for the per-event paths and retention", schema_hot.STATEMENTS),
    # The local page keeps the ops we send, which the relay never echoes (crosstalk/features/ui/).
    Migration(12, "ui: the ops we sent", schema_ui.STATEMENTS),
    # Receipts owed to senders, written with the hold or the ack they report (store/receipts.py).
    Migration(13, "receipts owed to senders", schema_receipts.STATEMENTS),
    Migration(14, "room keys: every key minted for an epoch", _V14),
    Migration(15, "rooms: a joiner's own name owed", _V15),
    # A conceded memory hole keeps a journal until a complete member can repair it.
    Migration(16, "memory: conceded holes and their journal", schema_memory.STATEMENTS_V16),
    Migration(17, "rooms: a creation the relay has not confirmed", _V17),
    Migration(18, "room keys owed to joiners", _V18),
    Migration(19, "outbox: ops that carry keys", _V19),
    Migration(20, "membership: the signed history, and what did not verify", _V20),
    Migration(21, "memory: file reservations, and the relay's time of our posts",
              schema_memory.STATEMENTS_V21),
    # Which files agents wrote lately, ours and roommates' (crosstalk/features/edits/).
    Migration(22, "edits: files agents wrote lately", schema_edits.STATEMENTS),
    # Who refused a message we sent, and why (a recipient's gate: crosstalk/core/delivery.py).
    Migration(23, "messages: refusals by recipients", schema_messages.STATEMENTS_V23),
    Migration(24, "rooms: who invited us, and through which room", _V24),
    # Full-text search over what this identity holds, kept by triggers (crosstalk/store/search.py).
    Migration(25, "search: a full-text index of what is held", schema_search.STATEMENTS),
    # Sealed ops leave the outbox and relay_inbound once done; a message's seq stays on its row.
    Migration(26, "disk: sent seq on sent messages, link copies trimmed", schema_disk.STATEMENTS),
    # A message's words kept once: search reads them from the message (store/schema_lean.py).
    Migration(27, "disk: words kept once", schema_lean.STATEMENTS),
    # Memory records indexed for search after their transaction (store/schema_search_queue.py).
    Migration(28, "search: memory records indexed after they commit",
              schema_search_queue.STATEMENTS),
    # A held message is its own search row (store/schema_compact.py).
    Migration(29, "disk: held messages indexed by their own rowid", schema_compact.STATEMENTS),
    Migration(30, "rooms: the epoch our invitation brought", _V30),
)
LATEST_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database header (0 for a new database)."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def newer_than_known(path_name: str, version: int, latest: int = LATEST_VERSION) -> DamagedState:
    """The refusal for a database written by a newer crosstalk."""
    return DamagedState(
        f"{path_name} has schema version {version}, newer than this crosstalk knows "
        f"({latest}); it was left untouched. Upgrade crosstalk to use it."
    )


def _apply(
    conn: sqlite3.Connection, step: Migration, latest: int, path_name: str, *,
    onto_new: bool = False,
) -> bool:
    """Apply ``step`` in its own transaction unless it is already in; ``True`` if applied now.
    ``onto_new``: only onto a new database (the snapshot of every step at once)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Read the version inside the write lock, so two openers never both apply a step.
        current = schema_version(conn)
        if current > latest:
            raise newer_than_known(path_name, current, latest)
        if current >= step.version or (onto_new and current != 0):
            conn.execute("ROLLBACK")
            return False
        for statement in step.statements:
            conn.execute(statement)
        # PRAGMA takes no bound parameters; the value is our own int.
        conn.execute(f"PRAGMA user_version = {int(step.version)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return True


def migrate(
    conn: sqlite3.Connection,
    steps: Sequence[Migration] = MIGRATIONS,
    *,
    path_name: str = "state.db",
    replay: bool = False,
) -> list[int]:
    """Apply every pending migration, each in its own transaction.

    ``conn`` must be in autocommit mode (``isolation_level=None``) with no transaction open.
    Running it again is a no-op, so it is safe to call on every open.

    Args:
        conn: the database connection.
        steps: the migrations, ``steps[i]`` taking version ``i`` to ``i + 1`` (tests pass
            their own; everyone else uses the default).
        path_name: the file's name, for error messages.
        replay: run every step on a new database too, not the snapshot of them all (what
            builds the snapshot).

    Returns:
        The versions applied now, in order (empty when already current).

    Raises:
        DamagedState: the database is newer than the code.
        LocalProtocolError: ``steps`` are not numbered 1, 2, 3, ...
    """
    if [step.version for step in steps] != list(range(1, len(steps) + 1)):
        raise LocalProtocolError("migration steps must be numbered 1, 2, 3, ... in order")
    ids.register(conn)  # step 29 converts stored ids with it
    latest = len(steps)
    current = schema_version(conn)
    if current > latest:
        raise newer_than_known(path_name, current, latest)
    applied: list[int] = []
    if current == 0 and not replay and steps is MIGRATIONS and 0 < schema_now.VERSION <= latest:
        at_once = Migration(schema_now.VERSION, "every step at once", schema_now.STATEMENTS)
        if _apply(conn, at_once, latest, path_name, onto_new=True):
            applied = list(range(1, schema_now.VERSION + 1))
        current = schema_version(conn)
    return applied + [
        step.version for step in steps[current:] if _apply(conn, step, latest, path_name)
    ]
