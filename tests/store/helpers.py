"""Helpers for the store tests: snapshots that prove a file was left untouched, damaged files."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import attrs

from crosstalk.store.db import connect


@attrs.frozen
class FileSnapshot:
    """A file's bytes, modification time and mode, plus the names beside it."""

    data: bytes
    mtime_ns: int
    mode: int
    siblings: frozenset[str]

    @classmethod
    def of(cls, path: Path) -> FileSnapshot:
        stat = path.stat()
        siblings = frozenset(p.name for p in path.parent.iterdir())
        return cls(path.read_bytes(), stat.st_mtime_ns, stat.st_mode, siblings)


def make_valid_db(path: Path) -> None:
    """A real, migrated state.db with enough rows to span several pages, cleanly closed."""
    conn = connect(path)
    conn.execute("BEGIN IMMEDIATE")
    for n in range(40):
        conn.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?)", (f"k{n}", '"' + "x" * 500 + '"')
        )
    conn.execute("COMMIT")
    conn.close()


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 20)


def _text(path: Path) -> None:
    path.write_text("relay = ws://localhost\nthis is not a database\n")


def _truncated(path: Path) -> None:
    make_valid_db(path)
    data = path.read_bytes()
    assert len(data) > 4 * 4096, "the fixture must span several pages"
    path.write_bytes(data[: len(data) // 2])


def _header_only(path: Path) -> None:
    make_valid_db(path)
    path.write_bytes(path.read_bytes()[:60])


def _zeroed_page(path: Path) -> None:
    make_valid_db(path)
    data = bytearray(path.read_bytes())
    data[4096 : 2 * 4096] = bytes([0xA5]) * 4096
    path.write_bytes(bytes(data))


DAMAGED_DB_MAKERS: dict[str, Callable[[Path], None]] = {
    "garbage bytes": _garbage,
    "text file": _text,
    "truncated database": _truncated,
    "truncated header": _header_only,
    "overwritten page": _zeroed_page,
}


def set_user_version(path: Path, version: int) -> None:
    """Stamp a schema version into an existing database with a plain connection."""
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {int(version)}")
    conn.commit()
    conn.close()
