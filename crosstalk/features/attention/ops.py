"""The attention gate's control ops: ``trust``, ``mute`` and ``attention``; the session and
notice ops the hooks call live in :mod:`crosstalk.features.attention.sessions` and are plugged
in from here.

``plug`` also wires the gate into the daemon: an applier decides every room message inside the
room's transaction that holds it (:class:`crosstalk.actors.gate.Triage`), and the gate actor,
started with the daemon, decides the messages that crossed no relay, sends the refusals those
transactions decided once they committed, and releases what waits. Settings are stored keyed
by fingerprint and relay room id; replies show our names for them.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from typing import Protocol

import attrs

from crosstalk import sim_hooks
from crosstalk.actors.children import ChildSpec, Mailbox
from crosstalk.actors.gate import Arrived, GateActor, GateInput, Me, Recheck, Refuse, Triage
from crosstalk.actors.room import AppliedListener, Applier
from crosstalk.core.attention import WINDOW, summarize
from crosstalk.core.levels import LOCAL_PREFIX, Level, TrustSettings, resolve_level
from crosstalk.core.mute import EVERYONE
from crosstalk.core.room import Applied
from crosstalk.errors import UnknownPeer, UnknownRoom
from crosstalk.features.attention.sessions import GateInbox, session_ops
from crosstalk.features.caps import CallsOps, Identified, SendsOps, Stored
from crosstalk.features.feature import Plugs, op
from crosstalk.store import attention as db
from crosstalk.store.gate import source_of
from crosstalk.store.membership import member_named, room_members_not_contacts
from crosstalk.store.rooms import Contact, list_contacts, list_rooms
from crosstalk.wire.control.params import MuteParams, NoParams, TrustParams
from crosstalk.wire.control.replies.daemon import (
    AttentionReply,
    MuteReply,
    MuteView,
    PinView,
    TrustReply,
)
from crosstalk.wire.control.table import ATTENTION, MUTE, TRUST
from crosstalk.wire.room_ops import MessageOp

DEFAULT_MUTE_MINUTES = 60.0
RECORD_HORIZON = 24 * 3600.0  # how far back `attention` looks for items still held
CLEAR = ("clear", "unset", "reset")
EVERYONE_WORDS = ("*", "everyone", "all")  # `crosstalk mute all [MINUTES]`


class Host(Stored, Identified, SendsOps, CallsOps, Protocol):
    """What attention uses: the store, who we are, the gate actor it declares (which posts into
    rooms), and the op table for ``hook_event``."""


# --- names -> keys ------------------------------------------------------------------------------


def _contact(conn: sqlite3.Connection, who: str) -> Contact | None:
    for contact in list_contacts(conn):
        if who in (contact.label, contact.fingerprint):
            return contact
    return None


def _room_id(conn: sqlite3.Connection, text: str) -> str | None:
    wanted = text.removeprefix("#")
    for room in list_rooms(conn):
        if wanted in (room.name, room.room_id):
            return room.room_id
    return None


def _need_room(conn: sqlite3.Connection, text: str) -> str:
    room = _room_id(conn, text)
    if room is None:
        raise UnknownRoom(f"You are in no room called {text!r}; `crosstalk room` lists yours.")
    return room


def _person_key(conn: sqlite3.Connection, who: str) -> str | None:
    if who.startswith(LOCAL_PREFIX):
        return who
    contact = _contact(conn, who)
    if contact is not None:
        return contact.fingerprint
    try:  # someone we know only through a room
        return member_named(conn, who)[0]
    except UnknownPeer:
        return None


def _names(conn: sqlite3.Connection) -> tuple[dict[str, str], dict[str, str]]:
    """(fingerprint -> label, room id -> name)."""
    people = {fp: label for fp, label, _room in room_members_not_contacts(conn)}
    people.update({c.fingerprint: c.label for c in list_contacts(conn)})
    rooms = {r.room_id: r.name for r in list_rooms(conn)}
    return people, rooms


# --- trust --------------------------------------------------------------------------------------


def _parse_level(text: str) -> Level | None:
    """A level, or None for "clear" (remove the entry)."""
    return None if text.strip().lower() in CLEAR else Level.parse(text)


def _is_level(text: str) -> bool:
    return text.strip().lower() in {level.value for level in Level}


def change_trust(conn: sqlite3.Connection, params: TrustParams) -> str | None:
    """Apply a ``trust`` change; returns the explanation for ``trust WHO`` (else None)."""
    settings = db.load_trust(conn)
    who, level_text, room_text = params.who, params.level, params.room
    if who is None:
        return None
    if level_text is None and _is_level(who):
        level = Level.parse(who)
        if room_text is None:
            settings = settings.with_default(level)
        else:
            settings = settings.with_room(_need_room(conn, room_text), level)
    elif level_text is None:
        return _explain(conn, settings, who, room_text)
    else:
        settings = _set_entry(conn, settings, who, _parse_level(level_text), room_text)
    db.save_trust(conn, settings)
    return None


def _set_entry(
    conn: sqlite3.Connection,
    settings: TrustSettings,
    who: str,
    level: Level | None,
    room_text: str | None,
) -> TrustSettings:
    person = None if who.startswith("#") else _person_key(conn, who)
    if room_text is not None:
        if person is None:
            raise UnknownPeer(f"You have no contact called {who!r}; `crosstalk peers` lists them.")
        return settings.with_pin(person, level, room=_need_room(conn, room_text))
    if person is not None:
        return settings.with_pin(person, level)
    room = _room_id(conn, who)
    if room is None:
        raise UnknownPeer(f"{who!r} is neither a contact nor a room of yours.")
    return settings.with_room(room, level)


def _explain(
    conn: sqlite3.Connection, settings: TrustSettings, who: str, room_text: str | None
) -> str:
    person = _person_key(conn, who)
    if person is None:
        raise UnknownPeer(f"You have no contact called {who!r}; `crosstalk peers` lists them.")
    room = None if room_text is None else _need_room(conn, room_text)
    source = source_of(conn, person)  # the gate's own view of a sender
    return resolve_level(settings, source, room).explain(source.label)


def trust_view(conn: sqlite3.Connection, explain: str | None) -> TrustReply:
    settings = db.load_trust(conn)
    people, rooms = _names(conn)
    return TrustReply(
        default=settings.default.value,
        rooms={rooms.get(r, r): lv.value for r, lv in sorted(settings.rooms.items())},
        people={people.get(p, p): lv.value for p, lv in sorted(settings.people.items())},
        pins=[
            PinView(person=people.get(p, p), room=rooms.get(r, r), level=lv.value)
            for r, pins in sorted(settings.room_people.items())
            for p, lv in sorted(pins.items())
        ],
        local=settings.local.value,
        explain=explain,
    )


# --- mute and attention -------------------------------------------------------------------------


def _mute_key(conn: sqlite3.Connection, who: str | None) -> str:
    if who is None or who.strip().lower() in EVERYONE_WORDS:
        return EVERYONE
    if not who.startswith("#"):
        person = _person_key(conn, who)
        if person is not None:
            return person
    room = _room_id(conn, who)
    if room is None:
        raise UnknownPeer(f"{who!r} is neither a contact nor a room of yours.")
    return room


def apply_mute(conn: sqlite3.Connection, params: MuteParams, now: float) -> MuteReply:
    """Mute (or with 0 minutes lift) ``who`` and say what holds them now; with neither
    ``who`` nor ``minutes``, change nothing and list the mutes."""
    mutes = db.load_mutes(conn)
    key: str | None = None
    if params.who is not None or params.minutes is not None:
        key = _mute_key(conn, params.who)
        minutes = DEFAULT_MUTE_MINUTES if params.minutes is None else params.minutes
        mutes = mutes.mute(key, minutes, now)
        db.save_mutes(conn, mutes, now)
    people, rooms = _names(conn)
    names = {EVERYONE: "everyone", **people, **rooms}
    active = mutes.active(now)
    views = sorted((MuteView(names.get(k, k), end) for k, end in active.items()),
                   key=lambda v: (v.until, v.who))
    if key is None:
        return MuteReply(sorted(v.who for v in views), None, mutes=views)
    # Lifting ben's mute leaves him held while everyone is muted: say so, and until when.
    holding = [k for k in dict.fromkeys((key, EVERYONE)) if mutes.is_muted(k, now)]
    return MuteReply(
        muted=sorted(v.who for v in views),
        until=mutes.ends_at(key, None, now),
        by=[names.get(k, k) for k in holding],
        mutes=views,
    )


def attention_summary(conn: sqlite3.Connection, now: float) -> AttentionReply:
    """Who reached us in the last hour (the record), and how many messages wait now (the
    gate's held notices: what was read or withdrawn since waits no more)."""
    entries = db.attention_entries(conn, now - RECORD_HORIZON)
    summary = summarize(entries, now, window=WINDOW)
    return AttentionReply(summary.reached_last_hour, db.count_held(conn), summary.by_source)


# --- wiring -------------------------------------------------------------------------------------


@attrs.frozen
class _GateWiring:
    child: ChildSpec[GateInput]  # the gate actor
    applier: Applier  # decides a room's messages in the room's transaction
    on_applied: AppliedListener  # after that commit: the refusals it decided go to the actor
    on_local: AppliedListener  # a message that crossed no relay: the actor decides it


def _me(daemon: Identified) -> Me | None:
    if daemon.identity is None:
        return None
    return Me(daemon.keys.fingerprint, daemon.identity.label)


async def _refuse(
    triage: Triage, gate: GateInbox, applied: list[Applied]
) -> None:
    """After a room's commit: the refusals its transaction decided go to the gate actor."""
    refusals = triage.take_refusals(applied)
    if refusals:
        await gate.send(Refuse(refusals))


async def _arrived(gate: GateInbox, applied: list[Applied]) -> None:
    """A message that crossed no relay: the gate actor decides it."""
    messages = tuple(a for a in applied if isinstance(a.op, MessageOp))
    if messages:
        await sim_hooks.handoff("handoff.room_to_gate")
        await gate.send(Arrived(messages))


def _wire_gate(daemon: Host, gate: Mailbox[GateInput]) -> _GateWiring:
    """The gate actor's child spec, the rooms' applier, and the listeners that feed the actor."""
    me = functools.partial(_me, daemon)
    triage = Triage(me=me, clock=time.time)
    make = functools.partial(
        GateActor, store=daemon.store, me=me, send_op=daemon.send_op, triage=triage
    )
    return _GateWiring(
        ChildSpec("gate", make, gate), triage.applier,
        functools.partial(_refuse, triage, gate.send), functools.partial(_arrived, gate.send),
    )


async def trust(daemon: Stored, gate: GateInbox, params: TrustParams) -> TrustReply:
    """Set or clear a trust level; the gate looks at what it holds again."""
    explain = await daemon.store.write(lambda c: change_trust(c, params))
    await gate.send(Recheck())
    return await daemon.store.read(lambda c: trust_view(c, explain))


async def mute(daemon: Stored, gate: GateInbox, params: MuteParams) -> MuteReply:
    """Mute or unmute someone (or everyone) for a while; the gate looks again."""
    reply = await daemon.store.write(lambda c: apply_mute(c, params, time.time()))
    await gate.send(Recheck())
    return reply


async def attention(daemon: Stored, params: NoParams) -> AttentionReply:
    """What the gate did lately and what it holds."""
    return await daemon.store.read(lambda c: attention_summary(c, time.time()))


def plug(daemon: Host) -> Plugs:
    """The attention and session ops, and the gate actor told of every arrival."""
    gate = Mailbox[GateInput]()
    wired = _wire_gate(daemon, gate)
    return Plugs(
        ops=(
            op(TRUST, functools.partial(trust, daemon, gate.send)),
            op(MUTE, functools.partial(mute, daemon, gate.send)),
            op(ATTENTION, functools.partial(attention, daemon)),
            *session_ops(daemon, gate.send),
        ),
        appliers=(wired.applier,),
        applied_listeners=(wired.on_applied,),
        local_listeners=(wired.on_local,),  # posts and me/SESSION are arrivals too
        children=(wired.child,),
    )
