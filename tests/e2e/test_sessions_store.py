"""Which transcript a turns slice uses when the sender names none, on a real migrated state.db.

(The store half of ``test_sessions.py``: no daemon, so every choice can be pinned exactly.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.store.db import connect
from crosstalk.store.migrations import schema_version
from crosstalk.store.sessions import current_transcript, get_session, register_session


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    opened = connect(tmp_path / "state.db")
    yield opened
    opened.close()


def add(
    conn: sqlite3.Connection, name: str, project: str, transcript: str | None, now: float
) -> None:
    register_session(
        conn,
        name=name,
        client="claude",
        project=project,
        inbox_socket=None,
        now=now,
        transcript_path=transcript,
    )


def test_the_migrated_schema_has_a_transcript_column(conn: sqlite3.Connection) -> None:
    """Step 6 adds sessions.transcript_path, empty for sessions registered before it."""
    columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
    assert "transcript_path" in columns and schema_version(conn) >= 6


def test_a_refresh_without_a_transcript_keeps_the_recorded_one(conn: sqlite3.Connection) -> None:
    """The MCP server re-registers without a path: the hook's path stays; a new one replaces."""
    add(conn, "s1", "/src/app", "/t/one.jsonl", 1.0)
    add(conn, "s1", "/src/app", None, 2.0)
    found = get_session(conn, "s1")
    assert found is not None and (found.transcript_path, found.last_seen) == ("/t/one.jsonl", 2.0)
    add(conn, "s1", "/src/app", "/t/two.jsonl", 3.0)
    assert current_transcript(conn, session="s1", cwd=None) == "/t/two.jsonl"


def test_a_named_session_uses_only_its_own_transcript(conn: sqlite3.Connection) -> None:
    """Naming a session picks its path, and a session with none gets none, not a neighbour's;
    a name nobody registered falls back to the project's latest session."""
    add(conn, "with", "/src/app", "/t/with.jsonl", 1.0)
    add(conn, "without", "/src/app", None, 2.0)
    assert current_transcript(conn, session="with", cwd="/elsewhere") == "/t/with.jsonl"
    assert current_transcript(conn, session="without", cwd="/src/app") is None
    assert current_transcript(conn, session="unknown", cwd="/src/app") == "/t/with.jsonl"
    assert current_transcript(conn, session="unknown", cwd="/elsewhere") is None


def test_without_a_session_the_latest_session_in_the_senders_project_lends_its_transcript(
    conn: sqlite3.Connection,
) -> None:
    """From a directory inside a project: the session seen last there; outside any, none."""
    add(conn, "old", "/src/app", "/t/old.jsonl", 1.0)
    add(conn, "new", "/src/app", "/t/new.jsonl", 5.0)
    add(conn, "other", "/src/lib", "/t/lib.jsonl", 9.0)
    add(conn, "prefix", "/src/ap", "/t/prefix.jsonl", 9.0)
    assert current_transcript(conn, session=None, cwd="/src/app/pkg/sub") == "/t/new.jsonl"
    assert current_transcript(conn, session=None, cwd="/src/lib") == "/t/lib.jsonl"
    assert current_transcript(conn, session=None, cwd="/home/me") is None
    assert current_transcript(conn, session=None, cwd=None) is None


def test_a_nested_project_wins_a_tie_in_time(conn: sqlite3.Connection) -> None:
    """Two sessions seen at the same moment: the one whose project is closer to cwd."""
    add(conn, "outer", "/src", "/t/outer.jsonl", 4.0)
    add(conn, "inner", "/src/app", "/t/inner.jsonl", 4.0)
    assert current_transcript(conn, session=None, cwd="/src/app/x") == "/t/inner.jsonl"
    assert current_transcript(conn, session=None, cwd="/src/other") == "/t/outer.jsonl"
