"""The membership feature's SQL: local roster rows, the keys that anchor trust, removed rooms.

Every function takes a connection so that it composes inside one ``store.write`` transaction.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from crosstalk.core.members import KnownMember
from crosstalk.errors import UnknownPeer
from crosstalk.store.room_keys import forget_room

_COLUMNS = "fingerprint, label, signing_key, box_key, state, added_by, gone, named"


def _row(r: tuple[Any, ...]) -> KnownMember:
    fp, label, ed, x, state, added_by, gone, named = r
    return KnownMember(
        str(fp), str(label), bytes(ed), bytes(x), str(state),
        None if added_by is None else str(added_by), bool(gone), int(named),
    )


def roster(conn: sqlite3.Connection, room_id: str) -> list[KnownMember]:
    """Every row of a room's local roster, gone members included."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM room_members WHERE room_id = ? ORDER BY fingerprint", (room_id,)
    ).fetchall()
    return [_row(r) for r in rows]


def trusted_keys(
    conn: sqlite3.Connection, own: tuple[str, bytes, bytes]
) -> dict[str, tuple[bytes, bytes]]:
    """The keys we already hold for people: ours and every contact's (a history that gives one
    of them other keys is refused)."""
    fp, ed, x = own
    keys = {fp: (ed, x)}
    for cfp, ced, cx in conn.execute("SELECT fingerprint, signing_key, box_key FROM contacts"):
        keys[str(cfp)] = (bytes(ced), bytes(cx))
    return keys


def write_roster(conn: sqlite3.Connection, room_id: str, rows: tuple[KnownMember, ...]) -> None:
    """Replace the room's roster rows with ``rows`` (the room must exist here)."""
    for m in rows:
        conn.execute(
            f"INSERT INTO room_members (room_id, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (room_id, fingerprint) DO UPDATE SET label = excluded.label, "
            "signing_key = excluded.signing_key, box_key = excluded.box_key, "
            "state = excluded.state, added_by = excluded.added_by, gone = excluded.gone, "
            "named = excluded.named",
            (room_id, m.fingerprint, m.label, m.ed_pub, m.x_pub, m.state, m.added_by,
             int(m.gone), m.named),
        )


def room_exists(conn: sqlite3.Connection, room_id: str) -> bool:
    return conn.execute("SELECT 1 FROM rooms WHERE room_id = ?", (room_id,)).fetchone() is not None


def room_is_ours(conn: sqlite3.Connection, room_id: str) -> bool:
    """Whether we are in the room (invited or joined), not having left or been removed."""
    row = conn.execute(
        "SELECT 1 FROM rooms WHERE room_id = ? AND state != 'left' AND removed_at IS NULL",
        (room_id,),
    ).fetchone()
    return row is not None


def mark_removed(conn: sqlite3.Connection, room_id: str, by: str | None, now: float) -> bool:
    """Record that the relay took us out of a joined room; True if this is news."""
    cur = conn.execute(
        "UPDATE rooms SET removed_by = ?, removed_at = ? "
        "WHERE room_id = ? AND state = 'joined' AND removed_at IS NULL",
        (by or "", now, room_id),
    )
    return cur.rowcount > 0


def removal(conn: sqlite3.Connection, room_id: str) -> tuple[str, str | None] | None:
    """``(room name, remover's name or None)`` if we were removed from the room."""
    row = conn.execute(
        "SELECT name, removed_by FROM rooms WHERE room_id = ? AND removed_at IS NOT NULL",
        (room_id,),
    ).fetchone()
    if row is None:
        return None
    return str(row[0]), display_name(conn, room_id, str(row[1])) if row[1] else None


def display_name(conn: sqlite3.Connection, room_id: str | None, fingerprint: str) -> str:
    """What we call ``fingerprint``: our contact's label, else the name a room gave them."""
    row = conn.execute(
        "SELECT label FROM contacts WHERE fingerprint = ?", (fingerprint,)
    ).fetchone()
    if row is not None:
        return str(row[0])
    where = "" if room_id is None else "AND room_id = ? "
    args: tuple[str, ...] = (fingerprint,) if room_id is None else (fingerprint, room_id)
    row = conn.execute(
        f"SELECT label FROM room_members WHERE fingerprint = ? {where}ORDER BY named DESC LIMIT 1",
        args,
    ).fetchone()
    return str(row[0]) if row is not None else fingerprint


def member_named(conn: sqlite3.Connection, who: str, me: str = "") -> tuple[str, str, str]:
    """A room member we never paired with, by name or fingerprint: ``(fp, label, room name)``.

    Raises UnknownPeer when nobody, or more than one person, has that name.
    """
    rows = conn.execute(
        "SELECT DISTINCT m.fingerprint, m.label, r.name FROM room_members m "
        "JOIN rooms r ON r.room_id = m.room_id "
        "WHERE (m.label = ? OR m.fingerprint = ?) AND m.gone = 0 AND r.state = 'joined' "
        "AND m.fingerprint != ? AND m.fingerprint NOT IN (SELECT fingerprint FROM contacts) "
        "ORDER BY r.name",
        (who, who, me),
    ).fetchall()
    people = {str(r[0]) for r in rows}
    if not people:
        raise UnknownPeer(f"You know nobody called {who!r}; `crosstalk peers` lists them.")
    if len(people) > 1:
        raise UnknownPeer(
            f"More than one person in your rooms is called {who!r}; use a fingerprint "
            "(`crosstalk peers` lists them)."
        )
    fp, label, room = rows[0]
    return str(fp), str(label), str(room)


def room_members_not_contacts(
    conn: sqlite3.Connection, me: str = ""
) -> list[tuple[str, str, str]]:
    """``(fingerprint, label, first room name)`` of everyone in our rooms we never paired with."""
    rows = conn.execute(
        "SELECT m.fingerprint, m.label, min(r.name) FROM room_members m "
        "JOIN rooms r ON r.room_id = m.room_id "
        "WHERE m.gone = 0 AND r.state = 'joined' AND r.removed_at IS NULL "
        "AND m.fingerprint != ? AND m.fingerprint NOT IN (SELECT fingerprint FROM contacts) "
        "GROUP BY m.fingerprint ORDER BY m.label",
        (me,),
    ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def member(conn: sqlite3.Connection, room_id: str, fingerprint: str) -> KnownMember | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM room_members WHERE room_id = ? AND fingerprint = ?",
        (room_id, fingerprint),
    ).fetchone()
    return None if row is None else _row(row)


def rename(conn: sqlite3.Connection, room_id: str, row: KnownMember) -> None:
    conn.execute(
        "UPDATE room_members SET label = ?, named = ? WHERE room_id = ? AND fingerprint = ?",
        (row.label, row.named, room_id, row.fingerprint),
    )


def mark_joined(conn: sqlite3.Connection, room_id: str, me: str) -> None:
    """We are a joined member now (the relay said so), and owe the room our name until
    :func:`name_given` runs in the commit that queues it."""
    conn.execute(
        "UPDATE rooms SET state = 'joined', name_owed = 1 WHERE room_id = ?", (room_id,)
    )
    conn.execute(
        "UPDATE room_members SET state = 'member' WHERE room_id = ? AND fingerprint = ?",
        (room_id, me),
    )


def name_given(conn: sqlite3.Connection, room_id: str) -> None:
    """Our ``MemberNamed`` for ``room_id`` is in the outbox (called in that commit)."""
    conn.execute("UPDATE rooms SET name_owed = 0 WHERE room_id = ?", (room_id,))


def names_owed(conn: sqlite3.Connection) -> list[str]:
    """Joined rooms we have not yet told our name since joining (a crash came between)."""
    rows = conn.execute(
        "SELECT room_id FROM rooms WHERE name_owed = 1 AND state = 'joined' ORDER BY room_id"
    ).fetchall()
    return [str(room_id) for (room_id,) in rows]


def owe_key_shares(conn: sqlite3.Connection, room_id: str, joiner: str, epoch: int) -> None:
    """The keys newer than ``epoch`` are owed to ``joiner`` (the oldest epoch it named itself
    under wins: it holds at least that one)."""
    conn.execute(
        "INSERT INTO key_shares_owed (room_id, joiner, epoch) VALUES (?, ?, ?) "
        "ON CONFLICT (room_id, joiner) DO UPDATE SET epoch = min(epoch, excluded.epoch)",
        (room_id, joiner, epoch),
    )


def key_shares_owed(conn: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """``(room, joiner, epoch)`` of every joiner owed newer keys."""
    rows = conn.execute(
        "SELECT room_id, joiner, epoch FROM key_shares_owed ORDER BY room_id, joiner"
    ).fetchall()
    return [(str(r), str(j), int(e)) for r, j, e in rows]


def key_shares_sent(conn: sqlite3.Connection, room_id: str, joiner: str) -> None:
    conn.execute(
        "DELETE FROM key_shares_owed WHERE room_id = ? AND joiner = ?", (room_id, joiner)
    )


def forget_invitation(conn: sqlite3.Connection, room_id: str) -> None:
    """An invitation the relay no longer has (declined elsewhere, or the room is gone): taken
    off as a decline is, the room's row kept as ``left``. Deleting it took the outbox rows of
    what we sent while we were in the room before, so ``sent`` said ``queued`` for a message
    the relay had sequenced (the simulation's seed 921: removed, invited back, removed again)."""
    state = conn.execute("SELECT state FROM rooms WHERE room_id = ?", (room_id,)).fetchone()
    if state is not None and state[0] == "invited":
        forget_room(conn, room_id)


def made_by_us_alone(conn: sqlite3.Connection, room_id: str, me: str) -> bool:
    """Whether we made the room and nobody else was ever in its roster here."""
    rows = conn.execute(
        "SELECT fingerprint, added_by FROM room_members WHERE room_id = ?", (room_id,)
    ).fetchall()
    return [(str(fp), added_by) for fp, added_by in rows] == [(me, me)]


def local_rooms(conn: sqlite3.Connection, me: str) -> list[tuple[str, str, bool]]:
    """``(room id, state, ours to create again)`` for every room not left or removed: the last
    is true for a room we made, nobody else was ever in, whose creation the relay has not
    confirmed. Rooms of two too: a pairing makes one with a signed history at the relay like
    any room's, and an accept pushed while the inviter was away reaches it only through the
    roster fetched at the next link-up (sim seed 45: the inviter saw its peer invited for
    good)."""
    rows = conn.execute(
        "SELECT room_id, state, create_pending FROM rooms WHERE state IN ('joined', 'invited') "
        "AND removed_at IS NULL ORDER BY room_id"
    ).fetchall()
    return [
        (str(r), str(s), bool(pending) and made_by_us_alone(conn, str(r), me))
        for r, s, pending in rows
    ]


def set_create_pending(conn: sqlite3.Connection, room_id: str, pending: bool) -> None:
    """Mark the room's creation as asked of the relay and not yet confirmed (or confirmed)."""
    conn.execute(
        "UPDATE rooms SET create_pending = ? WHERE room_id = ?", (int(pending), room_id)
    )


def removed_rooms(conn: sqlite3.Connection) -> list[str]:
    """Rooms the relay took us out of (kept to say so), newest removal last."""
    rows = conn.execute(
        "SELECT room_id FROM rooms WHERE removed_at IS NOT NULL AND state = 'joined' "
        "ORDER BY removed_at"
    ).fetchall()
    return [str(r[0]) for r in rows]


def invited_again(conn: sqlite3.Connection, room_id: str) -> None:
    """A room we were removed from whose invitation to come back arrived (its key with it)."""
    conn.execute(
        "UPDATE rooms SET state = 'invited', removed_at = NULL, removed_by = NULL "
        "WHERE room_id = ?",
        (room_id,),
    )


def invited_through(
    conn: sqlite3.Connection, room_id: str, inviter: str, via: str | None, epoch: int
) -> None:
    """Who invited us to ``room_id`` (a fingerprint), the named room the invitation came
    through (None: our room of two with them), and the epoch of the key it brought."""
    conn.execute(
        "UPDATE rooms SET invited_by = ?, invited_via = ?, invited_epoch = ? WHERE room_id = ?",
        (inviter, via, epoch, room_id),
    )


def invited_epoch(conn: sqlite3.Connection, room_id: str) -> int | None:
    """The epoch of the key our last invitation to ``room_id`` brought (None: we made the
    room, or the invitation came before this was kept)."""
    row = conn.execute("SELECT invited_epoch FROM rooms WHERE room_id = ?", (room_id,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def invitation_from(conn: sqlite3.Connection, room_id: str) -> tuple[str | None, str | None]:
    """``(inviter's name, the name of the room it came through)`` of a room we were invited to;
    ``(None, None)`` when not known (an invitation from before this was kept)."""
    row = conn.execute(
        "SELECT r.invited_by, v.name FROM rooms r LEFT JOIN rooms v ON v.room_id = r.invited_via "
        "WHERE r.room_id = ?",
        (room_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return None, None
    return display_name(conn, room_id, str(row[0])), None if row[1] is None else str(row[1])
