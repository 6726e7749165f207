"""Edit awareness's tables: roommates' published edits kept per person, room, session and
repository, bounded and windowed; our own sets; the settings."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.core.room import Applied
from crosstalk.store import edits as db
from crosstalk.store.migrations import migrate
from crosstalk.wire.room_ops import (
    MAX_EDIT_NOTE,
    MAX_EDITED_PATHS,
    EditedPath,
    EditsPublished,
    decode_op,
    encode_op,
)

ME, BEN = "me" * 8, "be" * 8
NOW = 1_000_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(connection)
    for room, state in (("r1", "joined"), ("r2", "joined"), ("gone", "left")):
        connection.execute(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, ?, 'shared', ?, 0)", (room, f"n-{room}", state),
        )
    connection.execute(
        "INSERT INTO contacts (fingerprint, label, signing_key, box_key, added_at) "
        "VALUES (?, 'ben', ?, ?, 0)",
        (BEN, b"k" * 32, b"x" * 32),
    )
    yield connection
    connection.close()


def _apply(conn: sqlite3.Connection, op: EditsPublished, *, room: str = "r1",
           sender: str = BEN, at: float = NOW) -> None:
    db.apply_published(conn, Applied(room, 1, "op", sender, at, op), me=ME)


def _paths(conn: sqlite3.Connection) -> list[tuple[str, str, str, float]]:
    return [(e.room_id, e.session, e.path, e.edited_at) for e in db.peer_recent(conn, 0.0)]


def test_the_op_round_trips_through_its_sealed_encoding() -> None:
    op = EditsPublished("shop", "s1", (EditedPath("src/a.py", 1.5),), "note")
    assert decode_op(encode_op(op)) == op


def test_a_publication_replaces_that_session_and_repository_only(
    conn: sqlite3.Connection,
) -> None:
    """s1's second op replaces s1's paths in shop; s2, another repository and another room
    keep theirs; the label is ben's contact name."""
    _apply(conn, EditsPublished("shop", "s1", (EditedPath("a.py", NOW - 5),)))
    _apply(conn, EditsPublished("shop", "s2", (EditedPath("b.py", NOW - 5),)))
    _apply(conn, EditsPublished("lib", "s1", (EditedPath("c.py", NOW - 5),)))
    _apply(conn, EditsPublished("shop", "s1", (EditedPath("a.py", NOW - 9),)), room="r2")
    _apply(conn, EditsPublished("SHOP", "s1", (EditedPath("d.py", NOW - 1),)))
    assert sorted(_paths(conn)) == sorted([
        ("r1", "s1", "d.py", NOW - 1), ("r1", "s2", "b.py", NOW - 5),
        ("r1", "s1", "c.py", NOW - 5), ("r2", "s1", "a.py", NOW - 9),
    ])
    [edit] = db.peer_edits_on(conn, "Shop", ["d.py"], NOW - 60)
    assert (edit.label, edit.repo, edit.fingerprint) == ("ben", "SHOP", BEN)


def test_our_own_publication_and_other_ops_are_not_kept(conn: sqlite3.Connection) -> None:
    _apply(conn, EditsPublished("shop", "s1", (EditedPath("a.py", NOW),)), sender=ME)
    assert _paths(conn) == []


def test_what_a_sender_wrote_is_bounded(conn: sqlite3.Connection) -> None:
    """Too many paths keep the newest MAX_EDITED_PATHS; bad paths go; a time past the relay's
    is the relay's; the note is cut; an empty repository or session is ignored."""
    many = tuple(EditedPath(f"f{i:03}", NOW - i) for i in range(100))
    bad = (EditedPath("../x", NOW), EditedPath("/abs", NOW), EditedPath("later", NOW + 999))
    _apply(conn, EditsPublished("shop", "s1", bad + many, "n" * 1000))
    kept = _paths(conn)
    assert len(kept) == MAX_EDITED_PATHS
    assert kept[0][2:] == ("later", NOW)
    assert all(not p.startswith(("/", "..")) for _, _, p, _ in kept)
    assert len(db.peer_recent(conn, 0.0)[0].note) == MAX_EDIT_NOTE
    _apply(conn, EditsPublished("", "s9", (EditedPath("z", NOW),)))
    _apply(conn, EditsPublished("shop", "", (EditedPath("z", NOW),)))
    assert len(_paths(conn)) == MAX_EDITED_PATHS


def test_edits_past_the_window_go_and_left_rooms_are_not_shown(conn: sqlite3.Connection) -> None:
    """An arrival deletes rows older than the window; a room we left shows nothing."""
    _apply(conn, EditsPublished("shop", "s1", (EditedPath("old.py", NOW - 100),)), room="r2")
    _apply(conn, EditsPublished("shop", "s1", (EditedPath("x.py", NOW),)), room="gone")
    assert [p for _, _, p, _ in _paths(conn)] == ["old.py"]
    later = NOW - 100 + db.window(conn) + 1
    _apply(conn, EditsPublished("shop", "s2", (EditedPath("new.py", later),)), at=later)
    assert [p for _, _, p, _ in _paths(conn)] == ["new.py"]
    assert conn.execute("SELECT count(*) FROM peer_edits WHERE path = 'old.py'").fetchone() == (0,)


def test_own_sets_are_replaced_and_windowed(conn: sqlite3.Connection) -> None:
    db.replace_own(conn, "s1", "shop", [EditedPath("a", NOW), EditedPath("b", NOW - 1)], 0.0)
    db.replace_own(conn, "s2", "shop", [EditedPath("c", NOW - 50)], 0.0)
    assert db.own_set(conn, "s1", "SHOP") == [EditedPath("a", NOW), EditedPath("b", NOW - 1)]
    db.replace_own(conn, "s1", "shop", [EditedPath("d", NOW)], NOW - 10)
    assert db.own_set(conn, "s1", "shop") == [EditedPath("d", NOW)]
    assert db.own_set(conn, "s2", "shop") == []  # older than the cutoff


def test_settings_default_and_change(conn: sqlite3.Connection) -> None:
    """Sharing is on everywhere, allow, 30 minutes; each can be changed and read back."""
    assert (db.rooms_off(conn), db.on_reserved(conn), db.window(conn)) == (set(), "allow", 1800.0)
    db.set_room_shared(conn, "r2", False)
    db.set_on_reserved(conn, "block")
    db.set_window_minutes(conn, 5)
    assert (db.rooms_off(conn), db.on_reserved(conn), db.window(conn)) == ({"r2"}, "block", 300.0)
    db.set_room_shared(conn, "r2", True)
    assert db.rooms_off(conn) == set()


def test_sharing_inputs_are_joined_rooms_and_roommates_projects(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO peer_sessions (fingerprint, room_id, name, project, status, last_seen, "
        "published_at) VALUES (?, 'r2', 's', 'Shop', 'busy', 0, 0)", (BEN,),
    )
    assert db.sharing_inputs(conn) == (["r1", "r2"], [("r2", "Shop")])
