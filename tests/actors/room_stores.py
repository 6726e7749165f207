"""A store holding one joined room of two members, ana (us) and ben, for the room actor's tests."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from crosstalk import crypto
from crosstalk.store.db import Store
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire.room_ops import frame_body

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)


@asynccontextmanager
async def room_of_two(
    room_id: str, key: bytes, setup: Callable[[sqlite3.Connection], None] | None = None
) -> AsyncIterator[Store]:
    """A fresh store with ``room_id`` joined at epoch 0 under ``key``, ana and ben in its roster,
    then ``setup`` in the same transaction; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="ct-"))
    opened = await Store.open(root / "state.db")

    def build(conn: sqlite3.Connection) -> None:
        add_room(conn, Room(room_id, "team", "shared", "joined", 0, 0.0), key)
        for keys, label in ((ANA, "ana"), (BEN, "ben")):
            add_member(conn, RoomMember(room_id, keys.fingerprint, label, keys.ed_pub, keys.x_pub))
        if setup is not None:
            setup(conn)

    try:
        await opened.write(build)
        yield opened
    finally:
        await opened.close()
        shutil.rmtree(root, ignore_errors=True)


def insert_inbound(
    conn: sqlite3.Connection, room_id: str, ops: Iterable[tuple[int, str, str, bytes]]
) -> None:
    """Commit-ready inbound rows ``(seq, op id, sender fingerprint, body)``, as the link writes."""
    conn.executemany(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, 0, 0)",
        [(room_id, op_id, seq, sender, body) for seq, op_id, sender, body in ops],
    )


def bens_ops(room_id: str, key: bytes, plains: Iterable[tuple[int, bytes]]
             ) -> Callable[[sqlite3.Connection], None]:
    """A ``setup`` for :func:`room_of_two`: ben's ops ``(seq, plaintext)``, sealed under ``key``
    at epoch 0 (op ids ``op-SEQ``, nonces from the seq), arrived and not yet applied."""
    def setup(conn: sqlite3.Connection) -> None:
        rows = []
        for seq, plain in plains:
            sealed = crypto.seal_op(BEN, key, plain, room_id=room_id, epoch=0, op_id=f"op-{seq}",
                                    nonce=seq.to_bytes(24, "big"))
            rows.append((seq, f"op-{seq}", BEN.fingerprint, frame_body(0, sealed)))
        insert_inbound(conn, room_id, rows)
    return setup
