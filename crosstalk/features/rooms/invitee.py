"""Whom ``room invite`` may name, with the keys the invitation is sealed to and the room that
carries it.

A contact (someone we paired with) is invited through our room of two, as always. Anyone else
must be someone we share a named room with: a joined member of a room we are joined in (and were
not removed from). Their keys come from that room's membership history as we verified and stored
it (:mod:`crosstalk.store.membership_chain`, replayed by :class:`~crosstalk.wire.chain.ChainState`),
never from the roster rows, which also hold what an inviter told us about people; and only a
member the history has ``joined`` counts (not one merely invited, nor one who left or was
removed). The invitation then travels in that shared room, sealed to them, and says through which
room they were invited (:func:`crosstalk.features.rooms.appliers.adopt_invitation`).

A name is the one we show for them in that room; one that two different people have (in two
rooms, say) is refused as ambiguous, and the fingerprint settles it.
"""

from __future__ import annotations

import sqlite3

import attrs

from crosstalk.errors import UnknownPeer
from crosstalk.store import membership_chain as mc
from crosstalk.store.rooms import contact_named, direct_room_with
from crosstalk.wire.chain import ChainRefused, ChainState


@attrs.frozen
class Invitee:
    """Someone we may invite: who, their keys, and the room the invitation goes through."""

    fingerprint: str
    label: str
    ed_pub: bytes = attrs.field(repr=False)
    x_pub: bytes = attrs.field(repr=False)
    deliver_in: str  # the room id that carries the invitation
    via: str | None = None  # that room's name, when it is a named room (no room of two)


def invitee(conn: sqlite3.Connection, who: str, *, me: str) -> Invitee:
    """The person ``who`` (a name or a fingerprint) names, as :mod:`this module` says.

    Raises:
        UnknownPeer: nobody by that name we paired with or share a room with, or more than one
            person by that name in our rooms.
    """
    try:
        contact = contact_named(conn, who)
    except UnknownPeer:
        contact = None
    if contact is not None:
        direct = direct_room_with(conn, contact.fingerprint)
        if direct is not None:
            return Invitee(contact.fingerprint, contact.label, contact.signing_key,
                           contact.box_key, direct.room_id)
    found = _met(conn, who, me)
    people = {m.fingerprint for m in found}
    if not people:
        raise UnknownPeer(
            f"You share no room with anyone called {who!r}: invite someone you paired with, or "
            "a member of a room you are in (`crosstalk room` lists them)."
        )
    if len(people) > 1:
        raise UnknownPeer(
            f"More than one person in your rooms is called {who!r}; invite by fingerprint "
            "(`crosstalk room --json` lists each member's)."
        )
    return found[0]


def _met(conn: sqlite3.Connection, who: str, me: str) -> list[Invitee]:
    """Every joined member of our named rooms that ``who`` names, with the history's keys."""
    rooms = conn.execute(
        "SELECT room_id, name FROM rooms WHERE kind = 'shared' AND state = 'joined' "
        "AND removed_at IS NULL ORDER BY name"
    ).fetchall()
    found = []
    for room_id, name in rooms:
        try:
            history = ChainState.replay(room_id, mc.statements(conn, room_id), verify=False)
        except ChainRefused:  # stored only once verified; a history that fails now gives nobody
            continue
        ours = history.members.get(me)
        if ours is None or ours.state != "joined":
            continue
        labels = dict(conn.execute(
            "SELECT fingerprint, label FROM room_members WHERE room_id = ? AND gone = 0",
            (room_id,),
        ).fetchall())
        for fp, entry in history.members.items():
            if fp == me or entry.state != "joined" or fp not in labels:
                continue
            if who in (fp, labels[fp]):
                found.append(Invitee(fp, str(labels[fp]), entry.ed_pub, entry.x_pub,
                                     str(room_id), str(name)))
    return found


def met_through(conn: sqlite3.Connection, room_id: str, sender: str, me: str) -> bool:
    """Whether ``sender`` is someone we share the named room ``room_id`` with: we are joined
    there (not removed), and its verified history has both of us joined."""
    row = conn.execute(
        "SELECT 1 FROM rooms WHERE room_id = ? AND kind = 'shared' AND state = 'joined' "
        "AND removed_at IS NULL",
        (room_id,),
    ).fetchone()
    if row is None:
        return False
    try:
        history = ChainState.replay(room_id, mc.statements(conn, room_id), verify=False)
    except ChainRefused:
        return False
    joined = {fp for fp, e in history.members.items() if e.state == "joined"}
    return {sender, me} <= joined
