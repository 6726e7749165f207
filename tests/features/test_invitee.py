"""Whom ``room invite`` may name (issue 39, Build 5): a contact, or someone we share a room with,
whose keys come only from that room's verified membership history.

A real migrated ``state.db`` in memory, as carl's daemon holds it: carl paired with ana only; ana
made #team and brought ben and carl in, so ben is someone carl met in a room.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator

import pytest

from crosstalk import crypto
from crosstalk.errors import CrosstalkError
from crosstalk.features.rooms.invitee import invitee
from crosstalk.store import membership_chain as mc
from crosstalk.store.migrations import migrate
from crosstalk.store.rooms import Contact, Room, RoomMember, add_member, add_room, upsert_contact
from tests.wire.chain_helpers import History, team

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
CARL = crypto.Keys(b"\x05" * 32, b"\x06" * 32)
OTHER_BEN = crypto.Keys(b"\x07" * 32, b"\x08" * 32)
LABELS = {ANA.fingerprint: "ana", BEN.fingerprint: "ben", CARL.fingerprint: "carl",
          OTHER_BEN.fingerprint: "ben"}


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    upsert_contact(c, Contact(ANA.fingerprint, "ana", "", ANA.ed_pub, ANA.x_pub))
    yield c
    c.close()


def hold(conn: sqlite3.Connection, name: str, history: History) -> None:
    """carl holds ``history`` as #name: the verified statements, and the roster rows they give
    (named as their members named themselves)."""
    room = history.room
    add_room(conn, Room(room, name, "shared", "joined", 0, time.time()), b"k" * 32)
    mc.append(conn, room, 0, list(zip(history.statements, history.state.links, strict=True)))
    for fp, entry in history.state.members.items():
        state = "invited" if entry.state == "invited" else "member"
        add_member(conn, RoomMember(room, fp, LABELS[fp], entry.ed_pub, entry.x_pub, state,
                                    entry.added_by))
        if entry.state == "left":  # as reconcile keeps them: gone, their keys kept
            conn.execute("UPDATE room_members SET gone = 1 WHERE room_id = ? AND fingerprint = ?",
                         (room, fp))

def test_someone_met_in_a_room_is_found_by_name_and_by_fingerprint(
    conn: sqlite3.Connection,
) -> None:
    """ben, met in #team, is invited with the keys #team's history gives him, through #team."""
    h = team("team", ANA, BEN, CARL)
    hold(conn, "team", h)
    for who in ("ben", BEN.fingerprint):
        found = invitee(conn, who, me=CARL.fingerprint)
        assert (found.fingerprint, found.label) == (BEN.fingerprint, "ben")
        assert (found.ed_pub, found.x_pub) == (BEN.ed_pub, BEN.x_pub)
        assert (found.deliver_in, found.via) == ("team", "team")


def test_a_contact_is_invited_through_our_room_of_two(conn: sqlite3.Connection) -> None:
    """ana, whom carl paired with, is invited as before: through their room of two, no via."""
    add_room(conn, Room("direct", "ana", "direct", "joined", 0, time.time()), b"k" * 32)
    for k in (ANA, CARL):
        add_member(conn, RoomMember("direct", k.fingerprint, LABELS[k.fingerprint], k.ed_pub,
                                    k.x_pub))
    found = invitee(conn, "ana", me=CARL.fingerprint)
    assert (found.fingerprint, found.deliver_in, found.via) == (ANA.fingerprint, "direct", None)


def test_keys_come_from_the_history_not_from_the_roster_rows(conn: sqlite3.Connection) -> None:
    """A roster row with other keys than the history gives (what a lying inviter listed) is not
    believed: the invitation is sealed to the history's keys."""
    hold(conn, "team", team("team", ANA, BEN, CARL))
    conn.execute("UPDATE room_members SET signing_key = ?, box_key = ? WHERE fingerprint = ?",
                 (b"\xee" * 32, b"\xee" * 32, BEN.fingerprint))
    found = invitee(conn, "ben", me=CARL.fingerprint)
    assert (found.ed_pub, found.x_pub) == (BEN.ed_pub, BEN.x_pub)


def test_a_roster_row_the_history_does_not_list_is_nobody(conn: sqlite3.Connection) -> None:
    """Someone listed in the rows but in no verified statement cannot be invited."""
    hold(conn, "team", team("team", ANA, BEN, CARL))
    add_member(conn, RoomMember("team", OTHER_BEN.fingerprint, "eve", OTHER_BEN.ed_pub,
                                OTHER_BEN.x_pub, "member", ANA.fingerprint))
    with pytest.raises(CrosstalkError) as exc:
        invitee(conn, "eve", me=CARL.fingerprint)
    assert exc.value.code == "unknown_peer"


def test_a_member_removed_from_the_room_does_not_count(conn: sqlite3.Connection) -> None:
    """ana removed ben from #team: carl can no longer invite him through it."""
    h = team("team", ANA, BEN, CARL)
    h.do(ANA, "remove", BEN)
    hold(conn, "team", h)
    for who in ("ben", BEN.fingerprint):
        with pytest.raises(CrosstalkError) as exc:
            invitee(conn, who, me=CARL.fingerprint)
        assert exc.value.code == "unknown_peer"


def test_someone_only_invited_to_the_room_does_not_count(conn: sqlite3.Connection) -> None:
    """ben was invited to #team and has not accepted: not yet someone carl shares it with."""
    h = History("team")
    h.do(ANA, "create")
    h.do(ANA, "invite", CARL)
    h.do(CARL, "accept")
    h.do(ANA, "invite", BEN)
    hold(conn, "team", h)
    with pytest.raises(CrosstalkError) as exc:
        invitee(conn, "ben", me=CARL.fingerprint)
    assert exc.value.code == "unknown_peer"


def test_a_name_two_people_have_is_ambiguous(conn: sqlite3.Connection) -> None:
    """Two people called ben in two rooms: refused, and the sentence says to use a fingerprint;
    each fingerprint still works."""
    hold(conn, "team", team("team", ANA, BEN, CARL))
    hold(conn, "ops", team("ops", ANA, OTHER_BEN, CARL))
    with pytest.raises(CrosstalkError) as exc:
        invitee(conn, "ben", me=CARL.fingerprint)
    assert exc.value.code == "unknown_peer"
    assert "More than one" in exc.value.message and "fingerprint" in exc.value.message
    assert invitee(conn, OTHER_BEN.fingerprint, me=CARL.fingerprint).via == "ops"


def test_a_room_we_were_removed_from_gives_nobody(conn: sqlite3.Connection) -> None:
    """carl was removed from #team (the room still shows, as removed): ben is not reachable
    through it."""
    hold(conn, "team", team("team", ANA, BEN, CARL))
    conn.execute("UPDATE rooms SET removed_at = 1.0, removed_by = ? WHERE room_id = 'team'",
                 (ANA.fingerprint,))
    with pytest.raises(CrosstalkError) as exc:
        invitee(conn, "ben", me=CARL.fingerprint)
    assert exc.value.code == "unknown_peer"
