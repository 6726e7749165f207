"""What `trust` and `mute` change, on a real (in-memory) database with two contacts and rooms."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from crosstalk.core.attention import AttentionEntry
from crosstalk.core.levels import Level
from crosstalk.core.mute import EVERYONE
from crosstalk.core.triage import Decision, Intent
from crosstalk.errors import UnknownPeer, UnknownRoom
from crosstalk.features.attention.ops import (
    MuteParams,
    TrustParams,
    apply_mute,
    attention_summary,
    change_trust,
    trust_view,
)
from crosstalk.store import attention as db
from crosstalk.store.messages import withdraw_notices
from crosstalk.store.migrations import migrate
from tests.actors.gate_world import BEN, BOT, ROOM_LOUD, populate


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    populate(c)
    yield c
    c.close()


def trust(conn: sqlite3.Connection, *args: str | None, room: str | None = None) -> str | None:
    who, level = [*args, None, None][:2]
    return change_trust(conn, TrustParams(who=who, level=level, room=room))


def test_a_level_alone_sets_the_default_and_with_in_sets_that_room(
    conn: sqlite3.Connection,
) -> None:
    """`trust notify` is the default; `trust deliver --in incident` is the room's level."""
    trust(conn, "notify")
    trust(conn, "deliver", room="#incident")
    settings = db.load_trust(conn)
    assert (settings.default, settings.rooms) == (Level.NOTIFY, {ROOM_LOUD: Level.DELIVER})


def test_a_person_is_pinned_globally_or_within_one_room(conn: sqlite3.Connection) -> None:
    """`trust ben handoff` pins ben everywhere; `--in incident` pins him in that room only."""
    trust(conn, "ben", "handoff")
    trust(conn, "ben", "mute", room="incident")
    settings = db.load_trust(conn)
    assert settings.people == {BEN: Level.HANDOFF}
    assert settings.room_people == {ROOM_LOUD: {BEN: Level.MUTE}}
    view = trust_view(conn, None)
    assert view.people == {"ben": "handoff"}
    assert [(p.person, p.room, p.level) for p in view.pins] == [("ben", "incident", "mute")]


def test_a_room_name_that_is_no_contact_sets_the_room_and_clear_removes_it(
    conn: sqlite3.Connection,
) -> None:
    """`trust incident deliver` sets the room; `trust incident clear` removes the setting."""
    trust(conn, "incident", "deliver")
    assert trust_view(conn, None).rooms == {"incident": "deliver"}
    trust(conn, "incident", "clear")
    assert trust_view(conn, None).rooms == {}


def test_asking_about_a_person_explains_their_level(conn: sqlite3.Connection) -> None:
    """`trust bot` says the bot cap holds even when pinned at deliver."""
    trust(conn, "bot", "deliver")
    explained = trust(conn, "bot")
    assert explained == "notify: bot is pinned at deliver, capped at notify because bot is a bot"


def test_unknown_names_are_refused_with_their_codes(conn: sqlite3.Connection) -> None:
    """A name that is neither a contact nor a room, or an unknown room, says so."""
    with pytest.raises(UnknownPeer):
        trust(conn, "zed", "ask")
    with pytest.raises(UnknownRoom):
        trust(conn, "ben", "ask", room="nowhere")


def test_mute_names_a_person_a_room_or_everyone_and_zero_lifts(conn: sqlite3.Connection) -> None:
    """Mutes are keyed by fingerprint, room id or everyone, and shown by our names for them."""
    apply_mute(conn, MuteParams(who="ben", minutes=10), now=0.0)
    apply_mute(conn, MuteParams(who="#incident", minutes=5), now=0.0)
    reply = apply_mute(conn, MuteParams(who=None, minutes=1), now=0.0)
    assert (reply.muted, reply.until) == (["ben", "everyone", "incident"], 60.0)
    assert db.load_mutes(conn).until == {BEN: 600.0, ROOM_LOUD: 300.0, EVERYONE: 60.0}
    lifted = apply_mute(conn, MuteParams(who="ben", minutes=0), now=0.0)
    assert lifted.muted == ["everyone", "incident"]
    assert BOT not in db.load_mutes(conn).until


def test_lifting_a_person_a_mute_on_everyone_still_covers_says_so(
    conn: sqlite3.Connection,
) -> None:
    """`mute ana 0` under a mute on everyone: her own mute is gone, but she is still held, and
    the reply says until when and by which mute."""
    apply_mute(conn, MuteParams(who="ben", minutes=10), now=0.0)
    apply_mute(conn, MuteParams(who="all", minutes=30), now=0.0)
    lifted = apply_mute(conn, MuteParams(who="ben", minutes=0), now=0.0)
    assert (lifted.until, lifted.by) == (1800.0, ["everyone"])
    free = apply_mute(conn, MuteParams(who="everyone", minutes=0), now=0.0)
    assert (free.muted, free.until, free.by) == ([], None, [])


def test_no_one_named_and_no_minutes_lists_the_mutes_and_changes_nothing(
    conn: sqlite3.Connection,
) -> None:
    """Bare `mute` shows what is muted until when; it never mutes everyone."""
    apply_mute(conn, MuteParams(who="ben", minutes=10), now=0.0)
    listed = apply_mute(conn, MuteParams(), now=60.0)
    assert listed.muted == ["ben"] and listed.until is None
    assert [(m.who, m.until) for m in listed.mutes] == [("ben", 600.0)]
    assert db.load_mutes(conn).until == {BEN: 600.0}


def _decided(conn: sqlite3.Connection, msg_id: str, decision: Decision, now: float) -> None:
    """The gate's record of one decision: its notice and its attention entry."""
    db.add_notice(conn, db.Notice(
        message_id=msg_id, session=None, target=None, sender=BEN, label="ben", from_session=None,
        room_id=ROOM_LOUD, intent=Intent.FYI, kind="message", decision=decision, due="idle",
        created_at=now,
    ))
    db.append_attention(conn, [AttentionEntry(msg_id, "ben", now, decision)])


def test_attention_counts_as_held_only_what_still_waits(conn: sqlite3.Connection) -> None:
    """Of four held in the hour, one was read and one withdrawn: two wait."""
    for n in range(4):
        _decided(conn, f"m{n}", Decision.NOTICE_WHEN_IDLE, now=100.0 + n)
    withdraw_notices(conn, ["m0"], now=200.0)  # read (the ack withdraws its notices)
    withdraw_notices(conn, ["m1"], now=200.0)  # or an ask that ended
    assert attention_summary(conn, now=300.0).held == 2
