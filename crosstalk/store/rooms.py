"""Contacts, rooms, their members and keys: typed queries over ``state.db``.

Every function takes a connection so several compose inside one ``await store.write(fn)``
transaction (a pairing adopts a contact, a room, its member rows and its key all at once, or not
at all). Room keys are secrets: they are read here for sealing and opening ops and never leave
the daemon.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import attrs

from crosstalk.errors import UnknownPeer, UnknownRoom


@attrs.frozen
class Contact:
    """Someone we paired with (or our own other machine)."""

    fingerprint: str
    label: str
    machine: str
    signing_key: bytes = attrs.field(repr=False)
    box_key: bytes = attrs.field(repr=False)
    is_agent: bool = False
    own_machine: bool = False
    added_at: float = 0.0


@attrs.frozen
class Room:
    room_id: str
    name: str
    kind: str  # "direct" (a room of two from pairing) or "shared" (a named room)
    state: str  # "invited", "joined" or "left"
    epoch: int
    created_at: float


@attrs.frozen
class RoomMember:
    room_id: str
    fingerprint: str
    label: str
    signing_key: bytes = attrs.field(repr=False)
    box_key: bytes = attrs.field(repr=False)
    state: str = "member"  # or "invited"
    added_by: str | None = None


def _contact(row: tuple[Any, ...]) -> Contact:
    fp, label, machine, sk, bk, agent, own, added = row
    return Contact(
        str(fp), str(label), str(machine), bytes(sk), bytes(bk), bool(agent), bool(own),
        float(added),
    )


_CONTACT_COLUMNS = (
    "fingerprint, label, machine, signing_key, box_key, is_agent, own_machine, added_at"
)


def unique_label(conn: sqlite3.Connection, wanted: str, machine: str, fingerprint: str) -> str:
    """A label for a new contact that never takes another key's name.

    A clash with a different key becomes ``label-machine``, then ``label-2``, ``label-3``…
    """
    def taken(label: str) -> bool:
        row = conn.execute(
            "SELECT 1 FROM contacts WHERE label = ? AND fingerprint != ?", (label, fingerprint)
        ).fetchone()
        return row is not None

    if not taken(wanted):
        return wanted
    if machine and not taken(f"{wanted}-{machine}"):
        return f"{wanted}-{machine}"
    n = 2
    while taken(f"{wanted}-{n}"):
        n += 1
    return f"{wanted}-{n}"


def upsert_contact(conn: sqlite3.Connection, contact: Contact) -> Contact:
    """Add a contact, or refresh one we already have by fingerprint (keeping our name for it)."""
    existing = find_contact(conn, contact.fingerprint)
    if existing is not None:
        conn.execute(
            "UPDATE contacts SET machine = ?, is_agent = ? WHERE fingerprint = ?",
            (contact.machine, int(contact.is_agent), contact.fingerprint),
        )
        return attrs.evolve(existing, machine=contact.machine, is_agent=contact.is_agent)
    label = unique_label(conn, contact.label, contact.machine, contact.fingerprint)
    stored = attrs.evolve(contact, label=label)
    conn.execute(
        f"INSERT INTO contacts ({_CONTACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (stored.fingerprint, stored.label, stored.machine, stored.signing_key, stored.box_key,
         int(stored.is_agent), int(stored.own_machine), stored.added_at),
    )
    return stored


def find_contact(conn: sqlite3.Connection, fingerprint: str) -> Contact | None:
    row = conn.execute(
        f"SELECT {_CONTACT_COLUMNS} FROM contacts WHERE fingerprint = ?", (fingerprint,)
    ).fetchone()
    return None if row is None else _contact(row)


def contact_named(conn: sqlite3.Connection, who: str) -> Contact:
    """The contact called ``who`` (a label, or a fingerprint), or UnknownPeer."""
    row = conn.execute(
        f"SELECT {_CONTACT_COLUMNS} FROM contacts WHERE label = ? OR fingerprint = ?",
        (who, who),
    ).fetchone()
    if row is None:
        raise UnknownPeer(f"You have no contact called {who!r}; `crosstalk peers` lists them.")
    return _contact(row)


def list_contacts(conn: sqlite3.Connection) -> list[Contact]:
    rows = conn.execute(f"SELECT {_CONTACT_COLUMNS} FROM contacts ORDER BY label").fetchall()
    return [_contact(r) for r in rows]


def add_room(conn: sqlite3.Connection, room: Room, key: bytes) -> None:
    """Record a room with its key for ``room.epoch`` (idempotent by room id)."""
    conn.execute(
        "INSERT INTO rooms (room_id, name, kind, state, epoch, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (room_id) DO UPDATE SET state = excluded.state",
        (room.room_id, room.name, room.kind, room.state, room.epoch, room.created_at),
    )
    conn.execute(
        "INSERT OR IGNORE INTO room_keys (room_id, epoch, key) VALUES (?, ?, ?)",
        (room.room_id, room.epoch, key),
    )


def set_room_state(conn: sqlite3.Connection, room_id: str, state: str) -> None:
    conn.execute("UPDATE rooms SET state = ? WHERE room_id = ?", (state, room_id))


def add_member(conn: sqlite3.Connection, member: RoomMember) -> None:
    conn.execute(
        "INSERT INTO room_members (room_id, fingerprint, label, signing_key, box_key, state, "
        "added_by) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (room_id, fingerprint) "
        # A row the relay's roster made first has only a placeholder name: ours replaces it.
        "DO UPDATE SET state = excluded.state, gone = 0, "
        "label = CASE WHEN named = 0 THEN excluded.label ELSE label END, "
        "named = max(named, 1)",
        (member.room_id, member.fingerprint, member.label, member.signing_key, member.box_key,
         member.state, member.added_by),
    )


def room_state(conn: sqlite3.Connection, room_id: str) -> str | None:
    """The room's state here ("joined", "invited"), or None if we hold no such room."""
    row = conn.execute("SELECT state FROM rooms WHERE room_id = ?", (room_id,)).fetchone()
    return None if row is None else str(row[0])


def get_room(conn: sqlite3.Connection, room_id: str) -> Room:
    row = conn.execute(
        "SELECT room_id, name, kind, state, epoch, created_at FROM rooms WHERE room_id = ?",
        (room_id,),
    ).fetchone()
    if row is None:
        raise UnknownRoom(f"There is no room {room_id!r} here; `crosstalk room` lists yours.")
    return Room(*row)


def list_rooms(conn: sqlite3.Connection) -> list[Room]:
    rows = conn.execute(
        "SELECT room_id, name, kind, state, epoch, created_at FROM rooms "
        "WHERE state != 'left' ORDER BY kind, name"
    ).fetchall()
    return [Room(*r) for r in rows]


def removed_from(conn: sqlite3.Connection) -> set[str]:
    """The rooms someone removed us from (still listed, so the person sees what happened)."""
    rows = conn.execute("SELECT room_id FROM rooms WHERE removed_at IS NOT NULL").fetchall()
    return {str(r[0]) for r in rows}


def members(
    conn: sqlite3.Connection, room_id: str, *, with_gone: bool = False
) -> list[RoomMember]:
    """A room's roster; ``with_gone`` adds those who left or were removed (their keys still
    verify what they signed before)."""
    rows = conn.execute(
        "SELECT room_id, fingerprint, label, signing_key, box_key, state, added_by "
        "FROM room_members WHERE room_id = ? AND (gone = 0 OR ?) ORDER BY label",
        (room_id, int(with_gone)),
    ).fetchall()
    return [RoomMember(str(r[0]), str(r[1]), str(r[2]), bytes(r[3]), bytes(r[4]), str(r[5]), r[6])
            for r in rows]


def added_by(conn: sqlite3.Connection, room_id: str, fingerprint: str) -> str | None:
    """Who added ``fingerprint`` to the room's roster (None: the room's maker, or not known)."""
    row = conn.execute(
        "SELECT added_by FROM room_members WHERE room_id = ? AND fingerprint = ?",
        (room_id, fingerprint),
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def signing_keys(conn: sqlite3.Connection, room_id: str) -> dict[str, bytes]:
    """Every Ed25519 key the room's members sign with, by fingerprint, gone members' included
    (what they signed before they left still verifies): what a batch of inbound ops needs of
    the roster, without reading whole :class:`RoomMember` rows."""
    rows = conn.execute(
        "SELECT fingerprint, signing_key FROM room_members WHERE room_id = ?", (room_id,)
    )
    return {str(r[0]): bytes(r[1]) for r in rows}


def room_key(conn: sqlite3.Connection, room_id: str, epoch: int) -> bytes | None:
    row = conn.execute(
        "SELECT key FROM room_keys WHERE room_id = ? AND epoch = ?", (room_id, epoch)
    ).fetchone()
    return None if row is None else bytes(row[0])


def direct_room_with(conn: sqlite3.Connection, fingerprint: str) -> Room | None:
    """Our joined room of two with ``fingerprint``, if we have one."""
    row = conn.execute(
        "SELECT r.room_id, r.name, r.kind, r.state, r.epoch, r.created_at FROM rooms r "
        "JOIN room_members m ON m.room_id = r.room_id "
        "WHERE r.kind = 'direct' AND r.state = 'joined' AND m.fingerprint = ? "
        "ORDER BY r.created_at LIMIT 1",
        (fingerprint,),
    ).fetchone()
    return None if row is None else Room(*row)
