"""Attention state round-trips through state.db: trust, mutes, ration stamps, the record,
notices."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from crosstalk.core.attention import AttentionEntry
from crosstalk.core.levels import Level, TrustSettings
from crosstalk.core.mute import EVERYONE, MuteState
from crosstalk.core.triage import Decision, Intent
from crosstalk.store import attention as db
from crosstalk.store import messages
from crosstalk.store.migrations import migrate


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    yield c
    c.close()


def test_trust_settings_round_trip_with_every_kind_of_entry(conn: sqlite3.Connection) -> None:
    """Default, local, room levels, global pins and in-room pins all come back as saved."""
    settings = (
        TrustSettings()
        .with_default(Level.NOTIFY)
        .with_room("r1", Level.DELIVER)
        .with_pin("fp-ben", Level.HANDOFF)
        .with_pin("fp-ben", Level.MUTE, room="r2")
    )
    settings = TrustSettings(
        default=settings.default, local=Level.ASK, rooms=settings.rooms,
        people=settings.people, room_people=settings.room_people,
    )
    db.save_trust(conn, settings)
    assert db.load_trust(conn) == settings


def test_saving_trust_replaces_removed_entries(conn: sqlite3.Connection) -> None:
    """A pin removed from the settings is gone from the database too."""
    db.save_trust(conn, TrustSettings().with_pin("fp-ben", Level.DELIVER))
    db.save_trust(conn, TrustSettings())
    assert db.load_trust(conn) == TrustSettings()


def test_saved_mutes_keep_only_those_still_in_force(conn: sqlite3.Connection) -> None:
    """An ended mute is not written back; a running one keeps its end time."""
    mutes = MuteState().mute("fp-ben", 1, now=0.0).mute(EVERYONE, 10, now=0.0)
    db.save_mutes(conn, mutes, now=60.0)
    assert db.load_mutes(conn) == MuteState({EVERYONE: 600.0})


def test_ration_stamps_round_trip_in_time_order(conn: sqlite3.Connection) -> None:
    """Stamps per recipient come back sorted by time."""
    db.save_ration_stamps(conn, {"fp-ben": [30.0, 10.0], "room": [5.0]})
    assert db.load_ration_stamps(conn) == {"fp-ben": [10.0, 30.0], "room": [5.0]}


def test_attention_entries_keep_older_entries_of_recent_items(conn: sqlite3.Connection) -> None:
    """An item held long ago and surfaced recently keeps both entries; stale items drop out."""
    db.append_attention(
        conn,
        [
            AttentionEntry("old", "ben", 10.0, Decision.NOTICE_NOW),
            AttentionEntry("m1", "ben", 20.0, Decision.NOTICE_WHEN_IDLE),
            AttentionEntry("m1", "ben", 200.0, Decision.NOTICE_NOW),
        ],
    )
    assert [(e.item, e.ts) for e in db.attention_entries(conn, since=100.0)] == [
        ("m1", 20.0),
        ("m1", 200.0),
    ]


def _notice(message_id: str, **changes: Any) -> db.Notice:
    base = db.Notice(
        message_id=message_id, session=None, target=None, sender="fp-ben", label="ben",
        from_session=None, room_id="r1", intent=Intent.FYI, kind="message",
        decision=Decision.NOTICE_WHEN_IDLE, due="idle", created_at=1.0,
    )
    return attrs.evolve(base, **changes)


def _add(conn: sqlite3.Connection, notice: db.Notice) -> None:
    """Hold the notice's message (what the notice says about it is read from there), then
    record the notice."""
    body = json.dumps({"text": "hi", "kind": notice.kind, "from_session": notice.from_session})
    messages.hold(conn, message_id=notice.message_id, room_id=notice.room_id or "r1",
                  sender=notice.sender, to=notice.target, intent=notice.intent.value,
                  body=body, received_at=notice.created_at, once=True)
    db.add_notice(conn, notice)


def test_a_notice_is_recorded_once_per_message_and_session(conn: sqlite3.Connection) -> None:
    """Recording the same decision twice keeps one row."""
    _add(conn, _notice("m1"))
    _add(conn, _notice("m1"))
    assert db.list_notices(conn) == [_notice("m1")]
    assert db.has_notice(conn, "m1") and not db.has_notice(conn, "m2")


def test_held_notices_for_a_session_follow_its_name_project_or_nobody(
    conn: sqlite3.Connection,
) -> None:
    """A session sees held notices addressed to it, its project, anyone; not another's."""
    _add(conn, _notice("anyone"))
    _add(conn, _notice("by-name", target="s1"))
    _add(conn, _notice("by-project", target="repo"))
    _add(conn, _notice("other", session="s2", target="s2"))
    _add(conn, _notice("now", decision=Decision.NOTICE_NOW, due="now", surfaced_at=1.0))
    mine = [n.message_id for n in db.held_notices(conn, "s1", "repo")]
    assert mine == ["anyone", "by-name", "by-project"]
    assert len(db.held_notices(conn)) == 4


def test_releasable_notices_are_those_a_live_session_could_take(
    conn: sqlite3.Connection,
) -> None:
    """Held notices no live session could take are skipped, unless a mute's end could release
    them (a quiet hold of a question); a turned session narrows to what it could take."""
    _add(conn, _notice("anyone"))
    _add(conn, _notice("to-s1", session="s1", target="s1"))
    _add(conn, _notice("to-s2", session="s2", target="s2"))
    _add(conn, _notice("to-gone", session="gone", target=None))
    _add(conn, _notice("for-repo", target="repo"))
    _add(conn, _notice("for-nobody-live", target="elsewhere"))
    _add(conn, _notice(
        "quiet-ask", target="elsewhere", decision=Decision.HOLD_QUIET, intent=Intent.QUESTION,
    ))
    _add(conn, _notice("read"))
    conn.execute("UPDATE notices SET withdrawn_at = 2.0 WHERE message_id = 'read'")
    live = [("s1", "repo"), ("s2", "")]
    every = [n.message_id for n in db.releasable_notices(conn, live)]
    assert every == ["anyone", "to-s1", "to-s2", "to-gone", "for-repo", "quiet-ask"]
    mine = [n.message_id for n in db.releasable_notices(conn, live, ("s1", "repo"))]
    assert mine == ["anyone", "to-s1", "to-gone", "for-repo", "quiet-ask"]
    assert db.quiet_held_sources(conn) == [("fp-ben", "r1")]


def test_marking_surfaced_claims_a_notice_for_anyone_once(conn: sqlite3.Connection) -> None:
    """The first session to surface a notice for anyone takes it; a second mark changes nothing."""
    _add(conn, _notice("m1"))
    db.mark_surfaced(conn, "m1", "s1", "b1", now=5.0)
    db.mark_surfaced(conn, "m1", "s2", "b2", now=6.0)
    [row] = db.list_notices(conn)
    assert (row.session, row.batch, row.surfaced_at) == ("s1", "b1", 5.0)
    assert db.held_notices(conn) == []


def test_marking_surfaced_hands_a_notice_to_the_claimant_the_gate_chose(
    conn: sqlite3.Connection,
) -> None:
    """A notice routed to a session that has gone goes to the new claimant, or to any match."""
    _add(conn, _notice("to-new", session="gone", target="repo"))
    _add(conn, _notice("to-any", session="gone", target="repo"))
    db.mark_surfaced(conn, "to-new", "s2", "b1", now=5.0)
    db.mark_surfaced(conn, "to-any", None, "b2", now=5.0)
    sessions = {n.message_id: n.session for n in db.list_notices(conn)}
    assert sessions == {"to-new": "s2", "to-any": None}


def test_only_surfaced_notices_can_be_marked_shown_and_only_once(conn: sqlite3.Connection) -> None:
    """A held notice is not shown; a surfaced one is shown once, by the session that showed it."""
    _add(conn, _notice("held"))
    _add(conn, _notice("now", decision=Decision.NOTICE_NOW, due="now", surfaced_at=1.0))
    assert db.mark_shown(conn, ["held", "now"], "s1", now=2.0) == 1
    assert db.mark_shown(conn, ["now"], "s2", now=3.0) == 0
    shown = {n.message_id: (n.session, n.shown_at) for n in db.list_notices(conn)}
    assert shown == {"held": (None, None), "now": ("s1", 2.0)}
