"""Names from the labels on members' ops, read once per batch (membership/names.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk import crypto
from crosstalk.core.members import BY_SELF, PLACEHOLDER, KnownMember
from crosstalk.core.room import Applied
from crosstalk.features.membership.core import placeholder_label
from crosstalk.features.membership.names import Names
from crosstalk.store import membership as q
from crosstalk.store.db import connect
from crosstalk.store.rooms import Room, add_room
from crosstalk.wire.memory import FactAdd
from crosstalk.wire.room_ops import MemoryEnvelope, Receipt, RoomOp

ROOM = "room-1"
ANA, CY = (crypto.Keys(bytes([i]) * 32, bytes([i + 100]) * 32) for i in (1, 3))


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(tmp_path / "state.db")
    connection.execute("BEGIN")
    add_room(connection, Room(ROOM, "peers", "shared", "joined", 0, 0.0), bytes(32))
    _set_placeholder(connection)
    yield connection
    connection.execute("ROLLBACK")
    connection.close()


def _set_placeholder(conn: sqlite3.Connection) -> None:
    """cy's row as the relay's roster makes it, or as another applier might set it again."""
    row = KnownMember(CY.fingerprint, placeholder_label(CY.fingerprint), CY.ed_pub, CY.x_pub,
                      "member", ANA.fingerprint, False, PLACEHOLDER)
    q.write_roster(conn, ROOM, (row,))


def _op(seq: int, op: RoomOp) -> Applied:
    return Applied(ROOM, seq, f"op{seq}", CY.fingerprint, 1000.0 + seq, op)


def _memory(seq: int, label: str) -> Applied:
    return _op(seq, MemoryEnvelope(FactAdd(f"f{seq}", "a fact"), at=1.0, label=label))


def _cy(conn: sqlite3.Connection) -> tuple[str, int]:
    row = q.member(conn, ROOM, CY.fingerprint)
    assert row is not None
    return row.label, row.named


def test_a_memory_op_label_fills_a_placeholder_and_later_labels_in_the_batch_do_not_rename(
    conn: sqlite3.Connection,
) -> None:
    """The first labelled op of a batch names cy; another label on cy's next op changes
    nothing (only MemberNamed renames), in the batch and out of it."""
    names = Names()
    with names.batch(conn):
        names.apply(conn, _memory(1, "cy"))
        names.apply(conn, _memory(2, "cyrus"))
    names.apply(conn, _memory(3, "cyril"))
    assert _cy(conn) == ("cy", BY_SELF)


def test_an_op_of_another_kind_forgets_who_the_batch_found_named(
    conn: sqlite3.Connection,
) -> None:
    """Another feature's applier may reset the roster on an op that is no message or memory op
    (here done by hand after a receipt): the next label is read against the row again, and fills
    the placeholder. Fails if the batch keeps what it learned across that op."""
    names = Names()
    with names.batch(conn):
        names.apply(conn, _memory(1, "cy"))
        names.apply(conn, _op(2, Receipt("delivered", ("m1",))))
        _set_placeholder(conn)
        names.apply(conn, _memory(3, "cyrus"))
    assert _cy(conn) == ("cyrus", BY_SELF)


def test_within_a_batch_a_named_member_is_read_once(conn: sqlite3.Connection) -> None:
    """While nothing but labelled ops arrive, cy's row is read for the first of them only: a
    reset in between (which no such op's applier makes) goes unseen until the batch ends."""
    names = Names()
    with names.batch(conn):
        names.apply(conn, _memory(1, "cy"))
        _set_placeholder(conn)
        names.apply(conn, _memory(2, "cyrus"))
        assert _cy(conn)[1] == PLACEHOLDER
    names.apply(conn, _memory(3, "cyrus"))
    assert _cy(conn) == ("cyrus", BY_SELF)
