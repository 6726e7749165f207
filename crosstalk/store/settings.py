"""Typed access to the ``settings`` table: daemon-wide values stored as JSON by key.

The helpers take a connection so they compose inside one transaction::

    await store.write(lambda conn: set_setting(conn, RELAY_URL, "wss://relay.example"))
    url = await store.read(lambda conn: get_setting(conn, RELAY_URL))
"""

from __future__ import annotations

import json
import sqlite3
from typing import TypeAlias

from crosstalk.errors import DamagedState

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"

# Well-known keys, so that two modules never spell one setting two ways.
RELAY_URL = "relay.url"
"""The relay this identity uses (a ``ws://`` or ``wss://`` URL)."""
RELAY_KEYS = "relay.pinned_keys"
"""Pinned relay public keys: ``{relay_url: base64 Ed25519 public key}``."""


def get_setting(conn: sqlite3.Connection, key: str) -> JSONValue:
    """The value stored under ``key``, or ``None`` when it was never set.

    Raises:
        DamagedState: the stored text is not JSON (the row is left as it is).
    """
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    if row is None:
        return None
    try:
        value: JSONValue = json.loads(row[0])
    except (json.JSONDecodeError, TypeError) as exc:
        raise DamagedState(
            f"the setting {key!r} in state.db does not parse ({exc}); it was left untouched."
        ) from None
    return value


def set_setting(conn: sqlite3.Connection, key: str, value: JSONValue) -> None:
    """Store ``value`` (anything JSON can carry) under ``key``, replacing any old value."""
    text = json.dumps(value, sort_keys=True, allow_nan=False)
    conn.execute(
        "INSERT INTO settings (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, text),
    )


def delete_setting(conn: sqlite3.Connection, key: str) -> bool:
    """Remove ``key``; ``True`` when there was a value to remove."""
    cursor = conn.execute("DELETE FROM settings WHERE key = ?", (key,))
    return cursor.rowcount > 0


def all_settings(conn: sqlite3.Connection) -> dict[str, JSONValue]:
    """Every setting, by key (for ``doctor`` and debugging)."""
    keys = [row[0] for row in conn.execute("SELECT key FROM settings ORDER BY key")]
    return {key: get_setting(conn, key) for key in keys}
