"""``peers``, ``rename`` and ``cost``: who is there, what you call them, what it has cost.

``peers`` is built from what this daemon knows first-hand: contacts from pairing, presence from
the relay (pushed only for people you share a room with), each person's attention level as the
gate would resolve it, and unread counts. A peer's sessions are what they published to a room we
share with them (``crosstalk.features.presence``), never anything the relay saw, and each
session lists the files its agent wrote lately (``crosstalk.features.edits``).
"""

from __future__ import annotations

import functools
import sqlite3
import time
from typing import Protocol

import attrs
import trio

from crosstalk.actors.router import PresenceQuery
from crosstalk.core.levels import resolve_level
from crosstalk.errors import UsageError
from crosstalk.features.caps import Homed, Identified, MakesIdentity, Routed, Stored
from crosstalk.features.feature import Plugs, op
from crosstalk.store import edits as edit_rows
from crosstalk.store import peers as peer_rows
from crosstalk.store.attention import load_mutes, load_trust
from crosstalk.store.edits import EditRow
from crosstalk.store.gate import source_of
from crosstalk.store.identity import save_identity
from crosstalk.store.membership import room_members_not_contacts
from crosstalk.store.presence import peer_sessions
from crosstalk.store.rooms import contact_named, list_contacts
from crosstalk.store.sessions import list_sessions
from crosstalk.wire.control.params import NoParams, RenameParams
from crosstalk.wire.control.replies.rooms import (
    CostReply,
    CostRow,
    EditedView,
    Me,
    PeersReply,
    PeerView,
    RenameReply,
    SessionView,
)
from crosstalk.wire.control.table import COST, PEERS, RENAME


class Host(Stored, Identified, Routed, Homed, MakesIdentity, Protocol):
    """What ``peers``, ``rename`` and ``cost`` use: the store, who we are, the router (who is
    online), and renaming ourselves."""


PRESENCE_WAIT = 2.0
CHARS_PER_TOKEN = 4  # a rough, stated estimate: we never see the models' own token counts


def _with_edits(views: list[SessionView], rows: list[EditRow]) -> list[SessionView]:
    """``views`` with each session's recent edits; a session that edited but published no
    presence (yet) is listed too, by the repository it edited in."""
    by_session: dict[str, list[EditedView]] = {}
    for row in rows:
        by_session.setdefault(row.session, []).append(
            EditedView(row.repo, row.path, row.edited_at)
        )
    out = [attrs.evolve(v, edits=by_session.pop(v.name, [])) for v in views]
    out += [SessionView(name, edits[0].repo, "unknown", None, edits)
            for name, edits in by_session.items()]
    return out


def _peers(
    conn: sqlite3.Connection, online: dict[str, bool], now: float, me: str = ""
) -> list[PeerView]:
    settings, mutes = load_trust(conn), load_mutes(conn)
    unread = peer_rows.unread_by_sender(conn)
    published = peer_sessions(conn)
    edited: dict[str, list[EditRow]] = {}
    for row in edit_rows.peer_recent(conn, now - edit_rows.window(conn)):
        edited.setdefault(row.fingerprint, []).append(row)

    def sessions(fingerprint: str) -> list[SessionView]:
        return _with_edits([
            SessionView(s.name, s.project, s.status, s.last_seen)
            for s in published.get(fingerprint, [])
        ], edited.get(fingerprint, []))

    views = []
    for c in list_contacts(conn):
        level = resolve_level(settings, source_of(conn, c.fingerprint), None).level
        views.append(
            PeerView(
                c.label,
                c.fingerprint,
                online.get(c.fingerprint, False),
                c.machine,
                level.value,
                mutes.is_muted(c.fingerprint, now),
                unread.get(c.fingerprint, 0),
                c.is_agent,
                sessions(c.fingerprint),
            )
        )
    for fp, label, room in room_members_not_contacts(conn, me):
        level = resolve_level(settings, source_of(conn, fp), None).level
        views.append(
            PeerView(label, fp, online.get(fp, False), "", level.value, mutes.is_muted(fp, now),
                     unread.get(fp, 0), False, sessions(fp), room)
        )
    return views


def _own_edits(conn: sqlite3.Connection, now: float) -> list[EditRow]:
    return edit_rows.own_recent(conn, now - edit_rows.window(conn))


def _costs(conn: sqlite3.Connection) -> list[CostRow]:
    rows = []
    for c in list_contacts(conn):
        t = peer_rows.traffic_with(conn, c.label, c.fingerprint)
        rows.append(
            CostRow(
                c.label,
                t.sent,
                t.received,
                t.shown,
                t.sent_chars // CHARS_PER_TOKEN,
                t.received_chars // CHARS_PER_TOKEN,
            )
        )
    return rows


def _rename_contact(conn: sqlite3.Connection, old: str, new: str) -> str:
    contact = contact_named(conn, old)
    if any(c.label == new for c in list_contacts(conn)):
        raise UsageError(f"You already call someone {new!r}.")
    peer_rows.relabel_contact(conn, contact.fingerprint, contact.label, new)
    return contact.label


async def peers(daemon: Host, _: NoParams) -> PeersReply:
    """The ``peers`` op: who we share rooms with, their sessions and ours."""
    me = daemon.require_identity()
    online: dict[str, bool] = {}
    send, receive = trio.open_memory_channel[dict[str, bool]](1)
    await daemon.router.send(PresenceQuery(send))
    with trio.move_on_after(PRESENCE_WAIT):
        online = await receive.receive()
    now = time.time()
    own = daemon.keys.fingerprint
    views = await daemon.store.read(lambda c: _peers(c, online, now, own))
    sessions, edited = await daemon.store.read(
        lambda c: (list_sessions(c), _own_edits(c, now))
    )
    mine = _with_edits(
        [SessionView(s.name, s.project, s.status.value, s.last_seen) for s in sessions], edited
    )
    return PeersReply(Me(me.label, daemon.keys.fingerprint, mine), views)


async def rename(daemon: Host, params: RenameParams) -> RenameReply:
    """The ``rename`` op: call a contact (or ourselves: ``me``) by another name."""
    new = params.new.strip()
    if not new or len(new) > 64 or "/" in new or new.startswith("#"):
        raise UsageError("A name is 1 to 64 characters, without '/' or a leading '#'.")
    if params.old == "me":
        record = attrs.evolve(daemon.require_identity(), label=new)
        await trio.to_thread.run_sync(save_identity, daemon.home.identity, record)
        daemon.adopt_identity(record)
        return RenameReply("me", new)
    old = await daemon.store.write(lambda c: _rename_contact(c, params.old, new))
    return RenameReply(old, new)


async def cost(daemon: Host, _: NoParams) -> CostReply:
    """The ``cost`` op: what each room costs us."""
    return CostReply(await daemon.store.read(_costs))


def plug(daemon: Host) -> Plugs:
    """The ``peers``, ``rename`` and ``cost`` ops."""
    return Plugs(ops=(
        op(PEERS, functools.partial(peers, daemon)),
        op(RENAME, functools.partial(rename, daemon)),
        op(COST, functools.partial(cost, daemon)),
    ))
