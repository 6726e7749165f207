"""File reservations: ``reserve``, ``reserve_renew``, ``release`` and ``reservations``.

A reservation is room memory (:mod:`crosstalk.core.reservations`): the op goes to the room like a
task claim, the relay sequences it, and the answer is the replicated outcome (granted, or refused
naming who holds what), or ``pending`` when the relay did not sequence it in time, or when it was
decided on a room memory that gave ops up and is not repaired yet (``why_pending``
``memory_incomplete``, with what it decided for now in ``provisional``: a repair may decide it
otherwise, so a refusal there is no ``reserved`` error either; ``reservations`` names such rooms
``incomplete``, as ``facts`` and ``tasks`` do). Paths are
relative to the repository root wherever in the repository the command runs (an absolute path
inside it works too), and the repository is named as facts' ``--in`` tags name it: its root
directory's name. Reads touch only the reservation tables, at the relay's time
(:func:`crosstalk.store.reservations.relay_now`).
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import sqlite3
from pathlib import Path

import attrs
import trio

from crosstalk import sim_hooks
from crosstalk.core.memory import final_on
from crosstalk.core.pathspec import PathspecError, overlaps, parse
from crosstalk.core.reservations import describe_conflict
from crosstalk.errors import (
    LocalProtocolError,
    NotInRepository,
    Refused,
    Reserved,
    UnknownReservation,
    UsageError,
)
from crosstalk.features.feature import ControlOp, op
from crosstalk.features.memory import views as v
from crosstalk.features.memory.handle import MemoryFeature
from crosstalk.project import repo_root
from crosstalk.store import memory as m
from crosstalk.store import reservations as r
from crosstalk.store.rooms import Room
from crosstalk.wire.control.params import (
    ReleaseParams,
    RenewParams,
    ReservationsParams,
    ReserveParams,
    Where,
)
from crosstalk.wire.control.replies.memory import (
    MEMORY_INCOMPLETE,
    UNDECIDED,
    ReleaseReply,
    ReservationsReply,
    ReservationView,
    ReserveReply,
)
from crosstalk.wire.control.table_memory import RELEASE, RESERVATIONS, RESERVE, RESERVE_RENEW
from crosstalk.wire.reservations import (
    ReleaseOp,
    RenewOp,
    Reservation,
    ReservationCode,
    ReservationOp,
    ReservationOutcome,
    ReserveOp,
)

#: What a reservation id looks like (``reserve`` makes them): told apart from a path to release.
_AN_ID = re.compile(r"r[0-9a-f]{10}")

# --- params and replies --------------------------------------------------------------------------


# --- paths ---------------------------------------------------------------------------------------


def repository_paths(root: Path, given: list[str]) -> list[str]:
    """``given`` as patterns relative to ``root``: an absolute path must lie inside it, a
    leading ``./`` is dropped; anything else is checked as a git pathspec.

    Raises:
        UsageError: a path outside the repository, or a pattern git would not read.
    """
    chosen: list[str] = []
    for text in given:
        pattern = text
        if os.path.isabs(text):
            try:
                pattern = Path(os.path.normpath(text)).relative_to(root).as_posix()
            except ValueError:
                raise UsageError(f"{text} is not inside the repository at {root}.") from None
            if pattern == ".":
                pattern = "**"
        while pattern.startswith("./"):
            pattern = pattern[2:]
        try:
            parse(pattern)
        except PathspecError as exc:
            raise UsageError(f"Not a path or glob crosstalk reads: {exc}") from None
        if pattern not in chosen:
            chosen.append(pattern)
    return chosen


def _root(cwd: str | None) -> Path | None:
    return repo_root(cwd) if cwd else None


async def _repository(cwd: str | None, command: str) -> Path:
    root = await trio.to_thread.run_sync(_root, cwd)
    if root is None:
        raise NotInRepository(
            f"Run `crosstalk {command}` inside the git repository whose files it names."
        )
    return root


# --- the ops -------------------------------------------------------------------------------------


async def reserve(feature: MemoryFeature, params: ReserveParams) -> ReserveReply:
    """Reserve paths of this repository; refused (``reserved``) where someone else holds them."""
    root = await _repository(params.cwd, "reserve")
    patterns = repository_paths(root, params.paths)
    reservation_id = "r" + secrets.token_hex(5)
    try:
        wanted = ReserveOp(
            reservation_id, root.name, tuple(patterns), params.shared, params.minutes,
            params.reason,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    room = await feature.room_for(Where(params.room, params.cwd))
    decided = await _send(feature, room, wanted)
    reply = ReserveReply(reservation_id, patterns, room.name, root.name, None, params.shared,
                         "pending", UNDECIDED)
    if decided is None:
        return reply
    detail = decided.detail
    if not decided.final:
        return _provisional(reply, detail)
    if detail.code is ReservationCode.GRANTED:
        return attrs.evolve(reply, until=detail.until, state="granted", why_pending=None)
    raise await _refusal(feature, detail)


async def renew(feature: MemoryFeature, params: RenewParams) -> ReserveReply:
    """Keep one's reservation ``minutes`` longer, counted from now (the relay's now)."""
    try:
        wanted = RenewOp(params.id, params.minutes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    rooms = await feature.rooms_for(Where(params.room, params.cwd))
    me = feature.daemon.keys.fingerprint
    mine = [h for h in await _held(feature, rooms) if h.reservation.holder.fingerprint == me]
    found = next((h for h in mine if h.reservation.reservation_id == params.id), None)
    if found is None:
        raise UnknownReservation(
            f"No reservation {params.id} of yours holds now; `crosstalk reservations` lists them."
        )
    room = next(room for room in rooms if room.room_id == found.room_id)
    held = found.reservation
    decided = await _send(feature, room, wanted)
    reply = ReserveReply(held.reservation_id, list(held.patterns), room.name, held.repo, None,
                         held.shared, "pending", UNDECIDED)
    if decided is None:
        return reply
    detail = decided.detail
    if not decided.final:
        return _provisional(reply, detail)
    if detail.code is ReservationCode.RENEWED:
        return attrs.evolve(reply, until=detail.until, state="renewed", why_pending=None)
    raise await _refusal(feature, detail)


def _provisional(reply: ReserveReply, detail: ReservationOutcome) -> ReserveReply:
    """``pending``: decided on a memory that gave ops up, which a repair may decide otherwise."""
    sim_hooks.probe("memory.answer_provisional")
    return attrs.evolve(reply, until=detail.until, why_pending=MEMORY_INCOMPLETE,
                        provisional=detail.code.value)


async def release(feature: MemoryFeature, params: ReleaseParams) -> ReleaseReply:
    """Give back reservations of one's own, by id or by path (see :class:`ReleaseParams`)."""
    rooms = await feature.rooms_for(Where(params.room, params.cwd))
    me = feature.daemon.keys.fingerprint
    mine = [h for h in await _held(feature, rooms) if h.reservation.holder.fingerprint == me]
    ids = {h.reservation.reservation_id for h in mine}
    by_id = [t for t in params.targets if t in ids]
    paths = [t for t in params.targets if t not in ids]
    stale = [t for t in paths if _AN_ID.fullmatch(t)]
    if stale:
        raise UnknownReservation(
            f"No reservation {stale[0]} of yours holds now; `crosstalk reservations` lists them."
        )
    root = await trio.to_thread.run_sync(_root, params.cwd)
    if paths and root is None:
        raise NotInRepository(
            "Release paths from inside their git repository, or name reservations by id."
        )
    patterns = tuple(repository_paths(root, paths)) if root is not None and paths else ()
    wanted: dict[str, list[ReleaseOp]] = {}
    for held in mine:
        chosen = _release_for(held.reservation, by_id, patterns, root, bool(params.targets))
        ops = wanted.setdefault(held.room_id, [])
        if chosen is not None and chosen not in ops:
            ops.append(chosen)
    released: list[str] = []
    pending: list[str] = []
    for room in rooms:
        for wanted_op in wanted.get(room.room_id, []):
            # Only ever our own reservations go: final or not, what it released is ours.
            decided = await _send(feature, room, wanted_op)
            if decided is None:
                pending.append(room.name)
            else:
                released.extend(i for i in decided.detail.released if i not in released)
    return ReleaseReply(released, pending)


def _release_for(
    held: Reservation, by_id: list[str], patterns: tuple[str, ...], root: Path | None,
    named: bool,
) -> ReleaseOp | None:
    """The release that takes ``held`` back, if what was asked for (ids, or ``patterns`` of the
    repository at ``root``) covers it."""
    if held.reservation_id in by_id:
        return ReleaseOp(reservation_ids=tuple(by_id))
    if root is not None and held.repo.casefold() == root.name.casefold():
        if patterns:
            overlapping = ReleaseOp(repo=held.repo, patterns=patterns)
            return overlapping if _overlaps_any(held, patterns) else None
        return None if named else ReleaseOp(repo=held.repo)
    return None if named or root is not None else ReleaseOp()


def _overlaps_any(held: Reservation, patterns: tuple[str, ...]) -> bool:
    return any(overlaps(p, q) for p in patterns for q in held.patterns)


async def reservations(feature: MemoryFeature, params: ReservationsParams) -> ReservationsReply:
    """What holds in the rooms asked about (all of ours by default), at the relay's now."""
    rooms = await feature.rooms_for(Where(params.room, params.cwd))
    if params.catch_up:
        await feature.catch_up_own(rooms)
    me = feature.daemon.keys.fingerprint
    label = feature.daemon.identity.label if feature.daemon.identity is not None else None
    names = {room.room_id: room.name for room in rooms}

    def read(conn: sqlite3.Connection) -> ReservationsReply:
        now = r.relay_now(conn)
        known = v.names(conn, me, label)
        views = [
            _view(h, names[h.room_id], known, me)
            for h in r.held(conn, [room.room_id for room in rooms], at=now)
        ]
        return ReservationsReply(views, now, v.incomplete(conn, rooms))

    return await feature.daemon.store.read(read)


def _view(held: r.HeldIn, room_name: str, known: dict[str, str], me: str) -> ReservationView:
    it = held.reservation
    holder = it.holder
    return ReservationView(
        id=it.reservation_id, holder=known.get(holder.fingerprint, holder.label),
        holder_fingerprint=holder.fingerprint, mine=holder.fingerprint == me,
        paths=list(it.patterns), repo=it.repo, room=room_name, room_id=held.room_id,
        until=it.until, shared=it.shared, reason=it.reason, granted_at=it.granted_at,
    )


# --- internals -----------------------------------------------------------------------------------


async def _held(feature: MemoryFeature, rooms: list[Room]) -> list[r.HeldIn]:
    await feature.catch_up_own(rooms)

    def read(conn: sqlite3.Connection) -> list[r.HeldIn]:
        return r.held(conn, [room.room_id for room in rooms], at=r.relay_now(conn))

    return await feature.daemon.store.read(read)


@attrs.frozen
class _Decided:
    detail: ReservationOutcome
    final: bool  # False: decided on a memory that gave ops up (core.memory.final_on)


async def _send(feature: MemoryFeature, room: Room, wanted: ReservationOp) -> _Decided | None:
    """Write one reservation op; its replicated outcome, or None while the relay has not
    sequenced it (the memory-sync actor reports it later)."""
    written = await feature.write(room, wanted)
    op_id = written.op_id
    if written.outcome is None:
        return None

    def read(conn: sqlite3.Connection) -> tuple[ReservationOutcome | None, bool]:
        # One transaction: a repair in between would pair an old outcome with a whole memory.
        return r.outcome(conn, room.room_id, op_id), m.cursor(conn, room.room_id).conceded

    detail, gave_up = await feature.daemon.store.read(read)
    if detail is None:
        raise LocalProtocolError(f"reservation op {op_id} was applied without an outcome")
    return _Decided(detail, final_on(wanted, gave_ops_up=gave_up))


async def _refusal(feature: MemoryFeature, detail: ReservationOutcome) -> Exception:
    """The error for a reservation op that did not do what was asked."""
    code = detail.code
    if code is ReservationCode.REFUSED and detail.conflict is not None:
        conflict = detail.conflict
        me = feature.daemon.keys.fingerprint
        label = feature.daemon.identity.label if feature.daemon.identity is not None else None

        def read(conn: sqlite3.Connection) -> tuple[float, dict[str, str]]:
            return r.relay_now(conn), v.names(conn, me, label)

        now, known = await feature.daemon.store.read(read)
        holder = attrs.evolve(
            conflict.holder, label=known.get(conflict.holder.fingerprint, conflict.holder.label)
        )
        return Reserved(describe_conflict(attrs.evolve(conflict, holder=holder), now_ts=now))
    if code is ReservationCode.OVER_LIMIT:
        return Refused("You hold as many reservations in this room as one may; release some.")
    if code is ReservationCode.INVALID:
        return UsageError(f"A path or glob is not one every member reads: {detail.detail}")
    if code is ReservationCode.NOT_HOLDER and detail.holder is not None:
        return Refused(f"{detail.holder.label} holds that reservation, not you.")
    if code is ReservationCode.NOT_FOUND:
        return UnknownReservation("That reservation no longer holds; it was released or lapsed.")
    return LocalProtocolError(f"a reservation op came back {code.value}")


def reservation_ops(feature: MemoryFeature) -> tuple[ControlOp, ...]:
    """The reservation ops."""
    return (
        op(RESERVE, functools.partial(reserve, feature)),
        op(RESERVE_RENEW, functools.partial(renew, feature)),
        op(RELEASE, functools.partial(release, feature)),
        op(RESERVATIONS, functools.partial(reservations, feature)),
    )

