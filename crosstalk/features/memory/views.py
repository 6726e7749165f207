"""Room memory as the control ops show it: params and replies, room choice, lists, ids.

Everything here is a plain function over a sqlite3 connection (run through ``Store.read``), so
``memory_ops`` stays the thin async layer. Names shown are *our* names for people (our contact
labels, our own label for us); a person we have no contact for (a room member with no direct
channel) is shown by the label they gave themselves.
"""

from __future__ import annotations

import sqlite3

from crosstalk.errors import UnknownFact, UnknownRoom, UnknownTask, UsageError
from crosstalk.store import memory as m
from crosstalk.store.rooms import Room, list_contacts, list_rooms, removed_from
from crosstalk.wire.control.replies.memory import (
    FactsReply,
    FactView,
    MemoryStateReply,
    RoomMemoryView,
    TasksReply,
    TaskView,
)
from crosstalk.wire.memory import FactRecord, Person, TaskRecord, TaskState

# --- params --------------------------------------------------------------------------------------


# --- replies -------------------------------------------------------------------------------------


# --- rooms ---------------------------------------------------------------------------------------


def joined_rooms(conn: sqlite3.Connection) -> list[Room]:
    """The rooms we are in: joined, and not removed from since (those still list, but take no
    writes: the relay refuses them)."""
    gone = removed_from(conn)
    return [r for r in list_rooms(conn) if r.state == "joined" and r.room_id not in gone]


def choose_room(conn: sqlite3.Connection, wanted: str | None, bound: str | None) -> Room:
    """The room a write goes to: ``wanted`` (name or id), else ``bound``, else the only one.

    Raises:
        UnknownRoom: ``wanted`` or ``bound`` names no room we are in.
        UsageError: no room was named and we are in none, or in several.
    """
    rooms = joined_rooms(conn)
    if wanted is not None:
        hits = [r for r in rooms if r.room_id == wanted] or [
            r for r in rooms if r.name.casefold() == wanted.casefold()
        ]
        if len(hits) != 1:
            raise UnknownRoom(f"You are in no room called {wanted!r}; `crosstalk room` lists them.")
        return hits[0]
    if bound is not None:
        for room in rooms:
            if room.room_id == bound:
                return room
        raise UnknownRoom(
            f"This project is bound to room {bound}, which you are not in; use --room."
        )
    if len(rooms) == 1:
        return rooms[0]
    if not rooms:
        raise UsageError("You are in no room yet; pair with someone first: `crosstalk room new`.")
    names = ", ".join(sorted(r.name for r in rooms))
    raise UsageError(f"You are in several rooms ({names}); say which with --room.")


def find_record(
    conn: sqlite3.Connection, kind: str, wanted: str, rooms: list[Room]
) -> tuple[Room, str]:
    """The room holding the fact/task ``wanted`` (its id, or a unique prefix of it).

    Raises:
        UnknownTask, UnknownFact: no such record in those rooms, or the prefix matches several.
    """
    hits: list[tuple[Room, str]] = []
    for room in rooms:
        ids = m.record_ids(conn, room.room_id, kind, wanted)
        exact = [rid for rid in ids if rid == wanted]
        hits += [(room, rid) for rid in (exact or ids)]
    if len(hits) == 1:
        return hits[0]
    what = "fact" if kind == "fact" else "task"
    unknown = UnknownFact if kind == "fact" else UnknownTask  # not found: no usage mistake
    if not hits:
        raise unknown(f"There is no {what} {wanted!r}; `crosstalk {what}s` lists them.")
    raise unknown(f"{wanted!r} matches several {what}s; give more of its id.")


# --- lists ---------------------------------------------------------------------------------------


def names(conn: sqlite3.Connection, me: str | None, my_label: str | None) -> dict[str, str]:
    """Our names for fingerprints: contacts, and ourselves."""
    known = {c.fingerprint: c.label for c in list_contacts(conn)}
    if me is not None and my_label is not None:
        known[me] = my_label
    return known


def _name(person: Person | None, known: dict[str, str]) -> str | None:
    return None if person is None else known.get(person.fingerprint, person.label)


def fact_view(room: Room, fact: FactRecord, known: dict[str, str], now: float) -> FactView:
    people = [fact.text_by, *(c.by for c in fact.confirmations)]
    by: list[str] = []
    for person in people:
        label = _name(person, known) or person.fingerprint
        if label not in by:
            by.append(label)
    return FactView(fact.fact_id, fact.text, room.name, by, fact.age_s(now), list(fact.tags))


def task_view(room: Room, task: TaskRecord, known: dict[str, str]) -> TaskView:
    return TaskView(
        id=task.task_id,
        text=task.text,
        room=room.name,
        state=task.state.value,
        claimed_by=_name(task.claimer, known) if task.state is TaskState.CLAIMED else None,
        for_=_name(task.for_, known),
        by=_name(task.created_by, known) or task.created_by.fingerprint,
        note=task.note,
    )


def list_memory(
    conn: sqlite3.Connection, rooms: list[Room], *, facts: bool, include_all: bool, now: float,
    me: str | None, my_label: str | None,
) -> FactsReply | TasksReply:
    """Facts (live ones; all with ``include_all``) or tasks (open and claimed; all) of ``rooms``."""
    known = names(conn, me, my_label)
    cursors = {r.name: m.cursor(conn, r.room_id) for r in rooms}
    catching_up = [name for name, c in cursors.items() if c.hole_from is not None]
    gave_up = incomplete(conn, rooms)
    if facts:
        fact_views = [
            fact_view(room, fact, known, now)
            for room in rooms
            for fact in m.load_state(conn, room.room_id).facts(include_forgotten=include_all)
        ]
        return FactsReply(fact_views, catching_up, gave_up)
    task_views = [
        task_view(room, task, known)
        for room in rooms
        for task in m.load_state(conn, room.room_id).tasks(include_closed=include_all)
    ]
    return TasksReply(task_views, catching_up, gave_up)


def incomplete(conn: sqlite3.Connection, rooms: list[Room]) -> list[str]:
    """The names of the rooms whose memory gave ops up and was not repaired: what it decides
    (a claim, a reservation) is provisional."""
    return [r.name for r in rooms if (c := m.cursor(conn, r.room_id)).conceded
            and c.hole_from is None]


def memory_state(conn: sqlite3.Connection, rooms: list[Room]) -> MemoryStateReply:
    views = []
    for room in rooms:
        state = m.load_state(conn, room.room_id)
        cursor = m.cursor(conn, room.room_id)
        views.append(RoomMemoryView(
            room.name, room.room_id, state.last_seq, state.state_hash(),
            cursor.hole_from is not None, cursor.conceded and cursor.hole_from is None,
        ))
    return MemoryStateReply(views)
