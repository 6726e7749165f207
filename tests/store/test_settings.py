"""Typed settings helpers: JSON values by key."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.errors import DamagedState
from crosstalk.store.migrations import migrate
from crosstalk.store.settings import (
    RELAY_KEYS,
    RELAY_URL,
    JSONValue,
    all_settings,
    delete_setting,
    get_setting,
    set_setting,
)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(connection)
    yield connection
    connection.close()


@pytest.mark.parametrize(
    "value",
    ["ws://127.0.0.1:7", 3, 2.5, True, [1, "two"], {"ws://r": "a2V5"}, {"nested": {"a": [None]}}],
)
def test_settings_round_trip_json_values(conn: sqlite3.Connection, value: JSONValue) -> None:
    """Whatever JSON value is set is read back equal."""
    set_setting(conn, "some.key", value)
    assert get_setting(conn, "some.key") == value


def test_unset_setting_reads_as_none(conn: sqlite3.Connection) -> None:
    """A key never set reads as None."""
    assert get_setting(conn, RELAY_URL) is None


def test_setting_again_replaces_the_value(conn: sqlite3.Connection) -> None:
    """A second set overwrites; there is still one row."""
    set_setting(conn, RELAY_URL, "ws://a")
    set_setting(conn, RELAY_URL, "ws://b")
    assert get_setting(conn, RELAY_URL) == "ws://b"
    assert conn.execute("SELECT count(*) FROM settings").fetchone()[0] == 1


def test_delete_setting_reports_whether_it_removed_something(conn: sqlite3.Connection) -> None:
    """delete returns True once, then False, and the key reads as None."""
    set_setting(conn, RELAY_KEYS, {"ws://r": "key"})
    assert delete_setting(conn, RELAY_KEYS) is True
    assert delete_setting(conn, RELAY_KEYS) is False
    assert get_setting(conn, RELAY_KEYS) is None


def test_all_settings_lists_every_key(conn: sqlite3.Connection) -> None:
    """all_settings returns each key with its decoded value."""
    set_setting(conn, "b", 2)
    set_setting(conn, "a", [1])
    assert all_settings(conn) == {"a": [1], "b": 2}


def test_not_a_number_is_refused(conn: sqlite3.Connection) -> None:
    """NaN is not JSON, so it is refused rather than stored as something nothing can read."""
    with pytest.raises(ValueError):
        set_setting(conn, "x", float("nan"))
    assert get_setting(conn, "x") is None


def test_a_stored_value_that_does_not_parse_is_damaged_state(conn: sqlite3.Connection) -> None:
    """A row whose text is not JSON raises DamagedState naming the key, and stays as it was."""
    conn.execute("INSERT INTO settings VALUES ('broken', '{oops')")
    with pytest.raises(DamagedState, match="'broken'"):
        get_setting(conn, "broken")
    assert conn.execute("SELECT value FROM settings WHERE key = 'broken'").fetchone()[0] == "{oops"
