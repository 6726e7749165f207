"""Schema versions: ordered steps, one transaction each, idempotent, newer refused."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.errors import DamagedState, LocalProtocolError
from crosstalk.store.migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    migrate,
    schema_version,
)

V1_TABLES = {
    "settings",
    "contacts",
    "rooms",
    "room_members",
    "room_keys",
    "room_cursors",
    "room_ops",
    "outbox",
    "held_messages",
    "sessions",
}


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    yield connection
    connection.close()


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {row[0] for row in rows} - {"sqlite_sequence"}


def schema(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()


def test_steps_are_numbered_from_one_without_gaps() -> None:
    """MIGRATIONS[i] takes version i to i + 1, and LATEST_VERSION is the last of them."""
    assert [step.version for step in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert LATEST_VERSION == MIGRATIONS[-1].version


def test_new_database_is_migrated_to_the_latest_version(conn: sqlite3.Connection) -> None:
    """A fresh database gets every step, its user_version and the version-1 tables."""
    assert schema_version(conn) == 0
    assert migrate(conn) == list(range(1, LATEST_VERSION + 1))
    assert schema_version(conn) == LATEST_VERSION
    assert V1_TABLES <= tables(conn)


def test_migrating_again_changes_nothing(conn: sqlite3.Connection) -> None:
    """A second run applies no step and leaves the schema exactly as it was."""
    migrate(conn)
    before = schema(conn)
    assert migrate(conn) == []
    assert schema(conn) == before
    assert schema_version(conn) == LATEST_VERSION
    assert not conn.in_transaction


def test_newer_database_is_refused(conn: sqlite3.Connection) -> None:
    """A version beyond the last step raises DamagedState and nothing is changed."""
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    with pytest.raises(DamagedState, match="newer than this crosstalk knows"):
        migrate(conn)
    assert schema_version(conn) == LATEST_VERSION + 1
    assert tables(conn) == set()


ONE = Migration(1, "one", ("CREATE TABLE one (x)",))
TWO = Migration(2, "two", ("CREATE TABLE two (x)",))
BROKEN = Migration(
    3,
    "broken",
    (
        "CREATE TABLE three (x)",
        "CREATE TABLE broken (((",
    ),
)


def test_only_pending_steps_run(conn: sqlite3.Connection) -> None:
    """A database at version 1 gets step 2 only."""
    assert migrate(conn, [ONE]) == [1]
    assert migrate(conn, [ONE, TWO]) == [2]
    assert schema_version(conn) == 2
    assert tables(conn) == {"one", "two"}


def test_failed_step_rolls_back_alone(conn: sqlite3.Connection) -> None:
    """A step that fails leaves the earlier steps committed and none of its own tables."""
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, [ONE, TWO, BROKEN])
    assert schema_version(conn) == 2
    assert tables(conn) == {"one", "two"}
    assert not conn.in_transaction


def test_steps_out_of_order_are_a_bug(conn: sqlite3.Connection) -> None:
    """Steps that skip a number are refused before anything runs."""
    with pytest.raises(LocalProtocolError, match="numbered"):
        migrate(conn, [ONE, BROKEN])
    assert schema_version(conn) == 0


def test_v1_schema_checks_key_sizes(conn: sqlite3.Connection) -> None:
    """The version-1 tables refuse a room key that is not 32 bytes."""
    migrate(conn)
    conn.execute(
        "INSERT INTO rooms (room_id, name, kind, state, epoch, created_at) "
        "VALUES ('r1', 'room', 'shared', 'joined', 0, 0.0)"
    )
    conn.execute("INSERT INTO room_keys (room_id, epoch, key) VALUES ('r1', 0, ?)", (bytes(32),))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO room_keys (room_id, epoch, key) VALUES ('r1', 1, ?)", (bytes(31),)
        )
