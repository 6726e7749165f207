"""The send resolver: ``person/session`` and ``me/session`` name a session that exists, or are
refused with ``unknown_session`` and a sentence listing the sessions there are.

A real migrated ``state.db`` in memory: a contact with a room of two, what that contact
published of their sessions (through the presence applier), our own sessions table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from crosstalk.core.gate_routing import SESSION_TTL
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError, UnknownPeer
from crosstalk.features.messages.ops import resolve, resolve_own
from crosstalk.store.migrations import migrate
from crosstalk.store.presence import apply_published
from crosstalk.store.rooms import Contact, Room, RoomMember, add_member, add_room, upsert_contact
from crosstalk.store.sessions import register_session
from crosstalk.wire.room_ops import PublishedSession, SessionsPublished

NOW = 1_000_000.0
ME, BEN = "fp-me" + "0" * 27, "fp-ben" + "0" * 26
DIRECT = "room-ben"


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    upsert_contact(c, Contact(BEN, "ben", "laptop", b"e" * 32, b"x" * 32))
    add_room(c, Room(DIRECT, "ben", "direct", "joined", 0, NOW), b"k" * 32)
    for fp in (ME, BEN):
        add_member(c, RoomMember(DIRECT, fp, fp[:6], b"e" * 32, b"x" * 32, "member", ME))
    yield c
    c.close()


def publish(conn: sqlite3.Connection, *sessions: tuple[str, str]) -> None:
    """ben publishes ``(name, project)`` sessions into our room of two."""
    op = SessionsPublished(tuple(PublishedSession(n, p, "idle", NOW) for n, p in sessions))
    apply_published(conn, Applied(DIRECT, 1, "op-1", BEN, NOW, op), me=ME)


def code_and_message(exc: pytest.ExceptionInfo[CrosstalkError]) -> tuple[str, str]:
    return exc.value.code, exc.value.message


def test_a_session_ben_published_is_addressed_to_that_session(conn: sqlite3.Connection) -> None:
    """``ben/s1`` with s1 published goes to ben's room of two, for s1."""
    publish(conn, ("s1", "billing-api"))
    address = resolve(conn, "ben/s1")
    assert (address.room_id, address.label, address.to) == (DIRECT, "ben/s1", "s1")


def test_a_session_ben_never_published_is_refused_listing_his(conn: sqlite3.Connection) -> None:
    """``ben/s2`` when ben published only s1: unknown_session, and the sentence names s1, its
    project, and how to address a project."""
    publish(conn, ("s1", "billing-api"))
    with pytest.raises(CrosstalkError) as exc:
        resolve(conn, "ben/s2")
    code, message = code_and_message(exc)
    assert code == "unknown_session"
    assert "'s2'" in message and "s1" in message and "billing-api" in message
    assert "ben/PROJECT" in message


def test_a_project_of_a_published_session_still_addresses_ben(conn: sqlite3.Connection) -> None:
    """``ben/billing-api`` names the project one of ben's sessions works in: accepted as today,
    the gate then routes it to that session."""
    publish(conn, ("s1", "billing-api"))
    address = resolve(conn, "ben/billing-api")
    assert (address.room_id, address.to) == (DIRECT, "billing-api")


def test_ben_with_no_published_sessions_is_refused_saying_so(conn: sqlite3.Connection) -> None:
    """Nothing published: unknown_session, and the sentence says to send to ben himself."""
    with pytest.raises(CrosstalkError) as exc:
        resolve(conn, "ben/anything")
    code, message = code_and_message(exc)
    assert code == "unknown_session"
    assert "no sessions" in message and "`ben`" in message


def test_a_person_alone_and_a_stranger_resolve_as_before(conn: sqlite3.Connection) -> None:
    """``ben`` needs no session; an unknown person is still unknown_peer."""
    assert resolve(conn, "ben").to is None
    with pytest.raises(UnknownPeer):
        resolve(conn, "zed/s1")


def test_my_own_live_session_is_addressed_and_an_unknown_one_refused(
    conn: sqlite3.Connection,
) -> None:
    """``me/review`` with a live session review: that session; ``me/unknown``: unknown_session
    naming review."""
    register_session(conn, name="review", client="claude", project="/src/api",
                     inbox_socket=None, now=NOW)
    assert resolve_own(conn, "review", now=NOW) == "review"
    assert resolve_own(conn, "api", now=NOW) == "api"  # the project it works in
    with pytest.raises(CrosstalkError) as exc:
        resolve_own(conn, "unknown", now=NOW)
    code, message = code_and_message(exc)
    assert code == "unknown_session" and "review" in message


def test_my_session_long_gone_no_longer_counts(conn: sqlite3.Connection) -> None:
    """A session not heard from within the session lifetime is not one of ours to address."""
    register_session(conn, name="old", client="claude", project="/src/api",
                     inbox_socket=None, now=NOW - SESSION_TTL - 1)
    with pytest.raises(CrosstalkError) as exc:
        resolve_own(conn, "old", now=NOW)
    assert exc.value.code == "unknown_session"
