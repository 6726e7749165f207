"""Ids as ``state.db`` keeps them: a message's or op's id as its 16 bytes, not 32 hex digits.

Every id this machine makes or receives for a message is 32 lowercase hex digits
(``secrets.token_hex(16)``); kept as a blob it takes half the bytes, in its row and in every
index entry over it (issue 41). Anything else (an id from an older peer or a test, a name) is
kept as the text it is: SQLite's columns take either, and one id always takes the same form, so
equality and joins between columns that both convert hold. Only the store sees blobs: every
function of crosstalk/store/ converts at its edge (:func:`to_db` for what it writes or looks
up, :func:`from_db` for what it reads), and ids stay hex strings everywhere else.
"""

from __future__ import annotations

import re
import sqlite3

_HEX_ID = re.compile(r"[0-9a-f]{32}")
#: The SQL function migrations convert existing rows with (SQLite 3.40 has no ``unhex``).
SQL_FUNCTION = "crosstalk_id"


def to_db(value: str) -> str | bytes:
    """``value`` as the store keeps it: 16 bytes for a 32-hex-digit id, else itself."""
    return bytes.fromhex(value) if _HEX_ID.fullmatch(value) else value


def from_db(value: object) -> str:
    """An id read from the store, as every other layer knows it (hex for a blob)."""
    return value.hex() if isinstance(value, bytes) else str(value)


def sql_text(column: str) -> str:
    """SQL reading ``column`` (an id kept by :func:`to_db`) as its text form."""
    return f"CASE WHEN typeof({column}) = 'blob' THEN lower(hex({column})) ELSE {column} END"


def _sql_to_db(value: str | bytes | int | float | None) -> str | bytes | int | float | None:
    return to_db(value) if isinstance(value, str) else value


def register(conn: sqlite3.Connection) -> None:
    """Give ``conn`` the SQL function :data:`SQL_FUNCTION` (:func:`to_db` on text, else the
    value itself), for the migration steps that convert stored ids."""
    conn.create_function(SQL_FUNCTION, 1, _sql_to_db, deterministic=True)


def prefix_where(column: str, prefix: str) -> tuple[str, list[object]]:
    """SQL matching the ids in ``column`` that start with ``prefix`` (lowercase hex), with its
    arguments: a range of the text ids, and one of the blobs (16 bytes, so ``prefix`` padded
    with 0s and with fs bounds exactly the ids it starts)."""
    where = f"({column} >= ? AND {column} < ?)"
    args: list[object] = [prefix, prefix + "g"]  # every text id with this prefix sorts between
    if re.fullmatch(r"[0-9a-f]{1,32}", prefix):
        where = f"({where} OR ({column} >= ? AND {column} <= ?))"
        args += [bytes.fromhex(prefix.ljust(32, "0")), bytes.fromhex(prefix.ljust(32, "f"))]
    return where, args
