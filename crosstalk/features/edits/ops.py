"""Edit awareness's daemon side (issue 37): the ops hooks call and the applier of roommates'
``EditsPublished``.

- ``edits_touched {session, cwd, paths, note?}``: a session's tools wrote these files. Each is
  resolved to its repository (off the event loop); the session's recent set per repository is
  kept in ``own_edits`` and the edits actor tells the rooms that share the repository.
- ``edits_check {session, cwd, paths}``: a session is about to write these files. The
  reply ``{text, decision}`` names others' recent edits of the same files in a repository of
  the same name, and others' reservations on them (the ``reservations`` op, when the daemon
  has it). A client that cannot show it before the tool runs shows it at its next prompt: the
  hook keeps it for the session (:mod:`crosstalk.hook.pending`).
- ``edits {room?, share?, on_reserved?, window_minutes?}``: others' recent edits and ours, and
  the settings (sharing per room, what to do on a file someone holds exclusively, the window);
  a given field changes that setting first.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections import defaultdict
from typing import Protocol

import trio

from crosstalk.actors.children import ChildSpec, Mailbox
from crosstalk.core.edits import (
    Hold,
    OnReserved,
    PeerEdit,
    Source,
    Target,
    merge,
    sharing_rooms,
    verdict,
)
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError, UsageError
from crosstalk.features.caps import CallsOps, Identified, SendsOps, Stored, own_fingerprint
from crosstalk.features.edits.actor import EditsActor, Touched
from crosstalk.features.edits.paths import RepoFile, resolve
from crosstalk.features.feature import Plugs, op
from crosstalk.features.rooms.views import find_room
from crosstalk.store import edits as db
from crosstalk.store.rooms import list_rooms
from crosstalk.wire.control.params import (
    CheckParams,
    EditsParams,
    ReservationsParams,
    TouchedParams,
)
from crosstalk.wire.control.replies.memory import (
    CheckReply,
    EditsReply,
    EditView,
    FileView,
    ReservationsReply,
    RoomShare,
    TouchedReply,
)
from crosstalk.wire.control.table import EDITS, EDITS_CHECK, EDITS_TOUCHED
from crosstalk.wire.control.table_memory import RESERVATIONS
from crosstalk.wire.room_ops import MAX_EDIT_NOTE, MAX_NAME, SessionsPublished

log = logging.getLogger(__name__)
HAND_OVER = 2.0  # how long a hook's request waits for a busy actor's inbox


class Host(Stored, Identified, SendsOps, CallsOps, Protocol):
    """What edits use: the store, who we are, its actor (which posts into rooms), and the op
    table (the ``reservations`` op, when the daemon has it)."""


Inbox = trio.MemorySendChannel[Touched]  # the edits actor's mailbox


def _session(text: str) -> str:
    session = text.strip()[:MAX_NAME]
    if not session:
        raise UsageError("Name the session whose files these are.")
    return session


def _by_repo(files: tuple[RepoFile, ...]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for f in files:
        grouped[f.repo].append(f.path)
    return dict(grouped)


async def edits_touched(daemon: Host, inbox: Inbox, params: TouchedParams) -> TouchedReply:
    """Record what a session wrote and hand the rooms that share each repository to the actor."""
    session = _session(params.session)
    resolved = await trio.to_thread.run_sync(resolve, params.cwd, list(params.paths))
    grouped = _by_repo(resolved.files)
    if not grouped:
        return TouchedReply([], [])
    now = time.time()

    def record(conn: sqlite3.Connection) -> dict[str, list[str]]:
        window = db.window(conn)
        for repo, paths in grouped.items():
            kept = merge(db.own_set(conn, session, repo), paths, now, window)
            db.replace_own(conn, session, repo, kept, now - window)
        joined, projects = db.sharing_inputs(conn)
        off = db.rooms_off(conn)
        return {
            repo: sharing_rooms(
                repo, joined=joined, peer_projects=projects, off=off,
                bound=[room] if (room := resolved.bound.get(repo)) else [],
            )
            for repo in grouped
        }

    rooms = await daemon.store.write(record)
    note = (params.note or "")[:MAX_EDIT_NOTE]
    for repo, told in rooms.items():
        if not told:
            continue
        with trio.move_on_after(HAND_OVER) as waited:
            await inbox.send(Touched(Source(session, repo), tuple(told), note))
        if waited.cancelled_caught:
            log.warning("edits: the actor is busy; %s's edits in %s wait for the next", session,
                        repo)
    files = [FileView(f.repo, f.path) for f in resolved.files]
    return TouchedReply(files, sorted({room for told in rooms.values() for room in told}))


async def tell_newly_sharing(
    daemon: Host, channel: Inbox, applied: list[Applied]
) -> None:
    """A roommate published sessions: a room where they work in a repository we edited lately
    now shares it, so it hears our recent edits there now, not at our next edit (their agent
    may be about to touch the very file). The actor skips a set a room was already told.
    Listener: never blocks (a full inbox drops it; the next publication tries again)."""
    me = own_fingerprint(daemon)
    wanted: dict[str, set[str]] = {}
    for entry in applied:
        if isinstance(entry.op, SessionsPublished) and entry.sender != me:
            projects = {s.project.casefold() for s in entry.op.sessions if s.project}
            wanted.setdefault(entry.room_id, set()).update(projects)
    if not any(wanted.values()):
        return
    now = time.time()

    def sources(conn: sqlite3.Connection) -> list[Source]:
        rows = db.own_recent(conn, now - db.window(conn))
        return list(dict.fromkeys(Source(r.session, r.repo) for r in rows))

    mine = await daemon.store.read(sources)
    for room, projects in wanted.items():
        for source in mine:
            if source.repo.casefold() in projects:
                try:
                    channel.send_nowait(Touched(source, (room,)))
                except trio.WouldBlock:
                    log.info("edits: the actor is busy; %s hears our edits later", room)
                    return


def _holds(reply: ReservationsReply, now: float) -> list[Hold]:
    """Others' reservations from the ``reservations`` op's reply, their ``until`` moved onto
    our clock by the reply's own ``now``."""
    shift = now - reply.now
    return [
        Hold(row.holder or "someone", row.repo, tuple(row.paths), row.until + shift, row.shared,
             row.reason)
        for row in reply.reservations
        if not row.mine
    ]


async def _reservations(daemon: Host, cwd: str | None, now: float) -> list[Hold]:
    if not daemon.ops.has("reservations"):
        return []
    try:
        asked = ReservationsParams(cwd=cwd, catch_up=False)
        reply = await daemon.ops.run(RESERVATIONS, asked, ReservationsReply)
    except CrosstalkError as exc:  # no room here, not set up: nobody's reservations to show
        log.debug("edits: no reservations for %s: %s", cwd, exc.message)
        return []
    return _holds(reply, now)


async def edits_check(daemon: Host, params: CheckParams) -> CheckReply:
    """What a session about to write ``paths`` should know, and whether it may."""
    _session(params.session)
    resolved = await trio.to_thread.run_sync(resolve, params.cwd, list(params.paths))
    if not resolved.files:
        return CheckReply(None, "allow")
    now = time.time()
    grouped = _by_repo(resolved.files)

    def read(conn: sqlite3.Connection) -> tuple[list[PeerEdit], str, float]:
        window = db.window(conn)
        rows = [r for repo, paths in grouped.items()
                for r in db.peer_edits_on(conn, repo, paths, now - window)]
        edits = list(dict.fromkeys(
            PeerEdit(r.label, r.session, r.repo, r.path, r.edited_at, r.note) for r in rows
        ))
        return edits, db.on_reserved(conn), window

    edits, policy, window = await daemon.store.read(read)
    holds = await _reservations(daemon, params.cwd, now)
    targets = [Target(f.repo, f.path) for f in resolved.files]
    found = verdict(targets, edits, holds, now, on_reserved=OnReserved(policy), window=window)
    return CheckReply(found.text, found.decision)


def _settings(conn: sqlite3.Connection, params: EditsParams) -> None:
    if params.share is not None:
        if params.room is None:
            raise UsageError("Name the room whose sharing of edited paths to turn on or off.")
        db.set_room_shared(conn, find_room(conn, params.room).room_id, params.share)
    elif params.room is not None:
        find_room(conn, params.room)  # an unknown room is an error even when only shown
    if params.on_reserved is not None:
        if params.on_reserved not in db.ON_RESERVED_CHOICES:
            raise UsageError(f"{params.on_reserved!r} is not one of allow, ask or block.")
        db.set_on_reserved(conn, params.on_reserved)
    if params.window_minutes is not None:
        if not 1 <= params.window_minutes <= 24 * 60:
            raise UsageError("The window is 1 to 1440 minutes.")
        db.set_window_minutes(conn, params.window_minutes)


def _edits_view(conn: sqlite3.Connection, params: EditsParams, now: float) -> EditsReply:
    _settings(conn, params)
    since = now - db.window(conn)
    names = {r.room_id: r.name for r in list_rooms(conn)}
    edits = [EditView(r.label, r.fingerprint, r.session, r.repo, r.path, r.edited_at, r.note,
                      names.get(r.room_id))
             for r in db.peer_recent(conn, since)]
    mine = [EditView("", "", r.session, r.repo, r.path, r.edited_at)
            for r in db.own_recent(conn, since)]
    off = db.rooms_off(conn)
    rooms = [RoomShare(r.name, r.room_id, r.room_id not in off)
             for r in list_rooms(conn) if r.state == "joined"]
    if params.room is not None:
        wanted = find_room(conn, params.room).room_id
        rooms = [r for r in rooms if r.id == wanted]
    return EditsReply(edits, mine, db.on_reserved(conn), db.window(conn) / 60.0, rooms)


def keep(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: keep a roommate's newest ``EditsPublished`` (never our own)."""
    db.apply_published(conn, applied, me=own_fingerprint(daemon))


async def show(daemon: Stored, params: EditsParams) -> EditsReply:
    """The ``edits`` op: others' recent edits, ours, and the settings (changing them if asked)."""
    now = time.time()
    if params == EditsParams():
        return await daemon.store.read(lambda c: _edits_view(c, params, now))
    return await daemon.store.write(lambda c: _edits_view(c, params, now))


def plug(daemon: Host) -> Plugs:
    """The edits ops, the applier of roommates' ``EditsPublished`` and the edits actor."""
    inbox = Mailbox[Touched]()
    make = functools.partial(EditsActor, store=daemon.store, send_op=daemon.send_op)
    return Plugs(
        ops=(
            op(EDITS_TOUCHED, functools.partial(edits_touched, daemon, inbox.send)),
            op(EDITS_CHECK, functools.partial(edits_check, daemon)),
            op(EDITS, functools.partial(show, daemon)),
        ),
        appliers=(functools.partial(keep, daemon),),
        applied_listeners=(functools.partial(tell_newly_sharing, daemon, inbox.send),),
        children=(ChildSpec("edits", make, inbox),),
    )
