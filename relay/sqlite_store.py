"""The default relay storage: one SQLite file under ``--data`` (WAL, ``synchronous=FULL``).

``commit`` applies a whole batch of writes in one transaction, so the shell's group commit costs
one fsync for however many posts arrived together. The file is created 0600 (SQLite gives its
``-wal`` and ``-shm`` files the same mode).

Schema changes are additive: :data:`SCHEMA` is all ``CREATE ... IF NOT EXISTS``, run at every
open, so a file from an older relay gains the new tables (version 2 added ``slots``,
``slot_parts`` and ``grants``) and keeps everything it had. ``PRAGMA user_version`` records the
newest schema the file has been opened with.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from crosstalk.errors import DamagedState
from crosstalk.wire.chain import Statement
from crosstalk.wire.converter import structure_remote, unstructure
from crosstalk.wire.relay import Member
from relay.storage import (
    SLOT_WRITES,
    CursorPut,
    DepartedOps,
    DevicePut,
    GrantDeleted,
    GrantPut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    Peer,
    RoomDeleted,
    RoomPut,
    RoomRecord,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRecord,
    SlotRemoved,
    Snapshot,
    StatementAppended,
    StoredOp,
    Write,
)

SCHEMA_VERSION = 3  # 3: the membership history (chain)

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (room TEXT PRIMARY KEY, head INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    room TEXT NOT NULL, fingerprint TEXT NOT NULL, ed_pub BLOB NOT NULL, x_pub BLOB NOT NULL,
    state TEXT NOT NULL, added_by TEXT NOT NULL, sig BLOB NOT NULL,
    PRIMARY KEY (room, fingerprint));
CREATE TABLE IF NOT EXISTS ops (
    room TEXT NOT NULL, seq INTEGER NOT NULL, sender TEXT NOT NULL, op_id TEXT NOT NULL,
    body BLOB NOT NULL, ts REAL NOT NULL, PRIMARY KEY (room, seq));
CREATE TABLE IF NOT EXISTS departed_ops (
    room TEXT NOT NULL, fingerprint TEXT NOT NULL, op_id TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (room, fingerprint, op_id));
CREATE TABLE IF NOT EXISTS chain (
    room TEXT NOT NULL, idx INTEGER NOT NULL, stmt TEXT NOT NULL, PRIMARY KEY (room, idx));
CREATE TABLE IF NOT EXISTS devices (
    fingerprint TEXT NOT NULL, device TEXT NOT NULL, PRIMARY KEY (fingerprint, device));
CREATE TABLE IF NOT EXISTS cursors (
    fingerprint TEXT NOT NULL, device TEXT NOT NULL, room TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (fingerprint, device, room));
CREATE TABLE IF NOT EXISTS slots (
    number TEXT PRIMARY KEY, owner_fp TEXT NOT NULL, owner_ed BLOB NOT NULL,
    owner_x BLOB NOT NULL, expires_at REAL NOT NULL,
    joiner_fp TEXT, joiner_ed BLOB, joiner_x BLOB);
CREATE TABLE IF NOT EXISTS slot_parts (
    number TEXT NOT NULL, side TEXT NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (number, side, idx));
CREATE TABLE IF NOT EXISTS grants (
    a TEXT NOT NULL, b TEXT NOT NULL, expires_at REAL NOT NULL, PRIMARY KEY (a, b));
"""


class SqliteStorage:
    """:class:`relay.storage.RelayStorage` over one SQLite database file."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock  # wall-clock seconds: slots and grants expired by it are not loaded
        if not path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            # The relay's one committer uses this connection; isolation_level=None lets
            # ``commit`` run explicit BEGIN IMMEDIATE / COMMIT transactions. Its COMMIT may run
            # on a worker thread (``stage``), never while another call uses the connection.
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._synced = True  # the connection's synchronous setting: FULL, or NORMAL if False
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
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
        departed: dict[str, dict[str, dict[str, int]]] = {}
        for room, fp, op_id, seq in q("SELECT room, fingerprint, op_id, seq FROM departed_ops"):
            departed.setdefault(room, {}).setdefault(fp, {})[op_id] = seq
        chains: dict[str, list[Statement]] = {}
        for room, text in q("SELECT room, stmt FROM chain ORDER BY room, idx"):
            chains.setdefault(room, []).append(structure_remote(json.loads(text), Statement))
        rooms = [
            RoomRecord(room, head, members.get(room, []), ops.get(room, []),
                       departed.get(room, {}), chains.get(room, []))
            for room, head in q("SELECT room, head FROM rooms ORDER BY room")
        ]
        devices = [DevicePut(fp, d) for fp, d in q("SELECT fingerprint, device FROM devices")]
        cursors = [
            CursorPut(fp, d, room, seq)
            for fp, d, room, seq in q("SELECT fingerprint, device, room, seq FROM cursors")
        ]
        slots, grants = self._load_slots()
        return Snapshot(rooms, devices, cursors, slots, grants)

    def _load_slots(self) -> tuple[list[SlotRecord], list[GrantPut]]:
        q = self._db.execute
        now = self._clock()
        parts: dict[str, list[SlotPartPut]] = {}
        for number, side, idx, data in q(
            "SELECT number, side, idx, data FROM slot_parts ORDER BY number, side, idx"
        ):
            parts.setdefault(number, []).append(SlotPartPut(number, side, idx, data))
        slots = []
        for number, ofp, oed, ox, expires_at, jfp, jed, jx in q(
            "SELECT number, owner_fp, owner_ed, owner_x, expires_at, joiner_fp, joiner_ed, "
            "joiner_x FROM slots WHERE expires_at > ? ORDER BY number", (now,)
        ):
            joiner = None if jfp is None else Peer(jfp, jed, jx)
            owner = Peer(ofp, oed, ox)
            slots.append(SlotRecord(number, owner, expires_at, joiner, parts.get(number, [])))
        grants = [
            GrantPut(a, b, t)
            for a, b, t in q("SELECT a, b, expires_at FROM grants WHERE expires_at > ? "
                             "ORDER BY a, b", (now,))
        ]
        return slots, grants

    def commit(self, writes: Sequence[Write]) -> None:
        self.stage(writes)()

    def stage(self, writes: Sequence[Write], *, sync: bool = True) -> Callable[[], None]:
        """Apply ``writes`` in a new transaction; the returned call commits it (the fsync, unless
        ``sync`` is False), and may run on another thread (:class:`relay.storage.StagedStorage`).

        ``sync=False`` commits with ``synchronous=NORMAL``: in WAL mode the commit is written to
        the log without an fsync, so it survives the process but not an OS crash; the log is
        replayed in order and stops at the first frame that did not reach the disk, so an
        unsynced commit can be lost only with every commit after it, and the next FULL commit's
        fsync covers it too (https://www.sqlite.org/pragma.html#pragma_synchronous)."""
        db = self._db
        if sync != self._synced:
            db.execute(f"PRAGMA synchronous={'FULL' if sync else 'NORMAL'}")
            self._synced = sync
        db.execute("BEGIN IMMEDIATE")
        try:
            for write in writes:
                self._apply(write)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return self._finish

    def _finish(self) -> None:
        try:
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _apply(self, w: Write) -> None:
        x = self._db.execute
        if isinstance(w, SLOT_WRITES):
            self._apply_slot(w)
        elif isinstance(w, RoomPut):
            x("INSERT OR IGNORE INTO rooms (room, head) VALUES (?, 0)", (w.room,))
        elif isinstance(w, RoomDeleted):
            for table in ("rooms", "members", "ops", "cursors", "departed_ops", "chain"):
                x(f"DELETE FROM {table} WHERE room = ?", (w.room,))
        elif isinstance(w, MemberPut):
            m = w.member
            x("INSERT OR REPLACE INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
              (w.room, m.fingerprint, m.ed_pub, m.x_pub, m.state, m.added_by, m.sig))
        elif isinstance(w, MemberDeleted):
            x("DELETE FROM members WHERE room = ? AND fingerprint = ?", (w.room, w.fingerprint))
            x("DELETE FROM cursors WHERE room = ? AND fingerprint = ?", (w.room, w.fingerprint))
        elif isinstance(w, DepartedOps):
            x("DELETE FROM departed_ops WHERE room = ? AND fingerprint = ?",
              (w.room, w.fingerprint))
            self._db.executemany("INSERT INTO departed_ops VALUES (?, ?, ?, ?)",
                                 [(w.room, w.fingerprint, op_id, seq) for op_id, seq in w.ops])
        elif isinstance(w, StatementAppended):
            x("INSERT OR REPLACE INTO chain VALUES (?, ?, ?)",
              (w.room, w.index, json.dumps(unstructure(w.stmt))))
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

    def _apply_slot(self, w: Write) -> None:
        x = self._db.execute
        if isinstance(w, SlotOpened):
            o = w.owner
            x("DELETE FROM slot_parts WHERE number = ?", (w.number,))
            x("INSERT OR REPLACE INTO slots VALUES (?, ?, ?, ?, ?, NULL, NULL, NULL)",
              (w.number, o.fingerprint, o.ed_pub, o.x_pub, w.expires_at))
        elif isinstance(w, SlotFilled):
            j = w.joiner
            x("UPDATE slots SET joiner_fp = ?, joiner_ed = ?, joiner_x = ? WHERE number = ?",
              (j.fingerprint, j.ed_pub, j.x_pub, w.number))
        elif isinstance(w, SlotPartPut):
            x("INSERT INTO slot_parts VALUES (?, ?, ?, ?)", (w.number, w.side, w.index, w.data))
        elif isinstance(w, SlotRemoved):
            x("DELETE FROM slots WHERE number = ?", (w.number,))
            x("DELETE FROM slot_parts WHERE number = ?", (w.number,))
        elif isinstance(w, GrantPut):
            x("INSERT OR REPLACE INTO grants VALUES (?, ?, ?)", (w.a, w.b, w.expires_at))
        elif isinstance(w, GrantDeleted):
            x("DELETE FROM grants WHERE a = ? AND b = ?", (w.a, w.b))

    def close(self) -> None:
        self._db.close()
