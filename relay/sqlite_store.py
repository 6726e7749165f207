"""The default relay storage: one SQLite file under ``--data`` (WAL, ``synchronous=FULL``).

``commit`` applies a whole batch of writes in one transaction, so the shell's group commit costs
one fsync for however many posts arrived together. The file is created 0600 (SQLite gives its
``-wal`` and ``-shm`` files the same mode).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from crosstalk.errors import DamagedState
from crosstalk.wire.relay import Member
from relay.storage import (
    CursorPut,
    DevicePut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    RoomDeleted,
    RoomPut,
    RoomRecord,
    Snapshot,
    StoredOp,
    Write,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (room TEXT PRIMARY KEY, head INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    room TEXT NOT NULL, fingerprint TEXT NOT NULL, ed_pub BLOB NOT NULL, x_pub BLOB NOT NULL,
    state TEXT NOT NULL, added_by TEXT NOT NULL, sig BLOB NOT NULL,
    PRIMARY KEY (room, fingerprint));
CREATE TABLE IF NOT EXISTS ops (
    room TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, op_id TEXT NOT NULL,
    body BLOB NOT NULL, ts REAL NOT NULL, PRIMARY KEY (room, seq));
CREATE TABLE IF NOT EXISTS devices (
    fingerprint TEXT NOT NULL, device TEXT NOT NULL, PRIMARY KEY (fingerprint, device));
CREATE TABLE IF NOT EXISTS cursors (
    fingerprint TEXT NOT NULL, device TEXT NOT NULL, room TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, device, room));
"""


class SqliteStorage:
    """:class:`relay.storage.RelayStorage` over one SQLite database file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            # The relay's one committer uses this connection; isolation_level=None lets
            # ``commit`` run explicit BEGIN IMMEDIATE / COMMIT transactions.
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise DamagedState(f"the relay database {path} cannot be opened ({exc}); "
                               "move it aside or restore it") from None

    def load(self) -> Snapshot:
        q = self._db.execute
        members: dict[str, list[Member]] = {}
        for room, fp, ed, x, state, added_by, sig in q(
            "SELECT room, fingerprint, ed_pub, x_pub, state, added_by, sig FROM members"
        ):
            members.setdefault(room, []).append(Member(fp, ed, x, state, added_by, sig))
        ops: dict[str, list[StoredOp]] = {}
        for room, seq, sender, op_id, body, ts in q(
            "SELECT room, seq, sender, op_id, body, ts FROM ops ORDER BY room, seq"
        ):
            ops.setdefault(room, []).append(StoredOp(seq, sender, op_id, body, ts))
        rooms = [
            RoomRecord(room, head, members.get(room, []), ops.get(room, []))
            for room, head in q("SELECT room, head FROM rooms ORDER BY room")
        ]
        devices = [DevicePut(fp, d) for fp, d in q("SELECT fingerprint, device FROM devices")]
        cursors = [
            CursorPut(fp, d, room, seq)
            for fp, d, room, seq in q("SELECT fingerprint, device, room, seq FROM cursors")
        ]
        return Snapshot(rooms, devices, cursors)

    def commit(self, writes: Sequence[Write]) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for write in writes:
                self._apply(write)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _apply(self, w: Write) -> None:
        x = self._db.execute
        if isinstance(w, RoomPut):
            x("INSERT OR IGNORE INTO rooms (room, head) VALUES (?, 0)", (w.room,))
        elif isinstance(w, RoomDeleted):
            for table in ("rooms", "members", "ops", "cursors"):
                x(f"DELETE FROM {table} WHERE room = ?", (w.room,))
        elif isinstance(w, MemberPut):
            m = w.member
            x("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
              (w.room, m.fingerprint, m.ed_pub, m.x_pub, m.state, m.added_by, m.sig))
        elif isinstance(w, MemberDeleted):
            x("DELETE FROM members WHERE room = ? AND fingerprint = ?", (w.room, w.fingerprint))
            x("DELETE FROM cursors WHERE room = ? AND fingerprint = ?", (w.room, w.fingerprint))
        elif isinstance(w, OpAppended):
            op = w.op
            x("INSERT INTO ops VALUES (?, ?, ?, ?, ?, ?)",
              (w.room, op.seq, op.sender, op.op_id, op.body, op.ts))
            x("UPDATE rooms SET head = ? WHERE room = ?", (op.seq, w.room))
        elif isinstance(w, OpsPruned):
            x("DELETE FROM ops WHERE room = ? AND seq <= ?", (w.room, w.through))
        elif isinstance(w, DevicePut):
            x("INSERT OR IGNORE INTO devices VALUES (?, ?)", (w.fingerprint, w.device))
        else:
            x("INSERT OR REPLACE INTO cursors VALUES (?, ?, ?, ?)",
              (w.fingerprint, w.device, w.room, w.seq))

    def close(self) -> None:
        self._db.close()
