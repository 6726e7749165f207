"""One room's file reservations, applied from the room log in the relay's order.

Theory of operation
-------------------
A reservation is an advisory claim on paths and globs of one repository ("I am editing
``src/auth/**`` for the next hour"). Like tasks, reservations are room memory: people send signed
ops, the relay sequences them, and every replica applies the same log with the same rules, so every
replica agrees on who holds what, and where two reservations collide **the first in log order wins
everywhere**. Nothing here reads a clock: time is the relay's timestamp of each op (``relay_ts``),
handed in with it, so reservations lapse at the same point of the log on every replica.

Inputs, in the log's order (``seq`` increasing; gaps are fine, since the rest of the log is not
ours):
    apply(op, sender=, seq=, relay_ts=, op_id=)   a ReserveOp, RenewOp or ReleaseOp
    member_left(fingerprint, seq=, relay_ts=)      someone left or was removed at ``seq``
Each input first moves the book's *clock* to ``max(clock, relay_ts)`` and lapses every reservation
whose ``until <= clock``. Taking the maximum means a relay clock that steps back never revives a
lapsed reservation. At-least-once delivery is harmless, as in :mod:`crosstalk.core.memory`: an op
id already applied returns its recorded outcome (``duplicate``) and changes nothing (if it comes
at a later seq, the cursor and clock still move); ``member_left`` at a seq already passed is a
no-op. A new op at a seq already passed is the caller's ordering bug: LocalProtocolError, and
nothing changes.

``sender`` is a :class:`Person`; its label is kept with what it holds, so every replica must pass
the label the author's envelope carries (as memory ops do), never its own name for them.

Rules (holder = the reservation's sender; "someone else" = another fingerprint; an overlap is two
patterns naming a common path, :func:`crosstalk.core.pathspec.overlaps`, in the same repository,
compared case-insensitively as facts' repository tags are)::

    reserve  its id was used by an earlier reserve       -> ALREADY_EXISTS
             a pattern we do not read                     -> INVALID (detail says why)
             sender holds MAX_ACTIVE_PER_HOLDER already   -> OVER_LIMIT
             overlaps an active reservation of someone else, where either is exclusive
                                                          -> REFUSED, conflict = earliest granted
             otherwise                                    -> GRANTED, until = relay_ts + minutes*60
    renew    unknown, released or lapsed id               -> NOT_FOUND
             someone else's                               -> NOT_HOLDER (holder named)
             sender's                                     -> RENEWED, until = relay_ts + minutes*60
    release  by ids / by patterns (those of the sender's in ``repo`` that overlap one) / all the
             sender's (in ``repo`` if given): the sender's matches are removed -> RELEASED (ids);
             none matched -> NOT_HOLDER if an id named is someone else's, else NOT_FOUND
    member_left   every reservation of that member is removed

Decisions (ours): a renewal *sets* the time left, counted from the renewing op, so it can also
shorten a reservation ("five more minutes"). The same holder may overlap their own reservations
freely (a session narrowing or widening what it holds). Release by pattern takes back every
reservation of the sender's that overlaps it, not only one spelled the same way: a leftover claim
blocks others, a claim given back too eagerly only ever was one's own.

Invariants (checked by the tests after every op of random logs): no two active reservations of
different holders overlap unless both are shared; every reservation held has ``until > clock``;
outcomes hold exactly the op ids applied. Outputs: each op's :class:`ReservationOutcome`,
:meth:`active` (at a relay time the caller passes), :meth:`snapshot`/:meth:`from_snapshot` and
:meth:`state_hash`, so the book is persisted and caught up like the rest of memory.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from crosstalk.core.pathspec import PathspecError, overlaps, parse
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire.converter import converter
from crosstalk.wire.people import Person
from crosstalk.wire.reservations import (
    RESERVATION_SNAPSHOT_VERSION,
    Conflict,
    ReleaseOp,
    RenewOp,
    Reservation,
    ReservationCode,
    ReservationOp,
    ReservationOutcome,
    ReservationSnapshot,
    ReserveOp,
)

MAX_ACTIVE_PER_HOLDER = 32

# The codes only a reserve produces with its own id: the ids an earlier reserve has used.
_RESERVE_CODES = frozenset(
    {ReservationCode.GRANTED, ReservationCode.REFUSED, ReservationCode.ALREADY_EXISTS,
     ReservationCode.INVALID, ReservationCode.OVER_LIMIT}
)


def canonical_bytes(snapshot: ReservationSnapshot) -> bytes:
    """The one byte encoding of a snapshot: sorted-key, compact, UTF-8 JSON (to sign and hash)."""
    data = converter.unstructure(snapshot)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def conflicting(a: Reservation, b: Reservation) -> Conflict | None:
    """How ``a`` and ``b`` collide (reported as ``b`` blocking ``a``), or None if they may both
    hold: same holder, another repository, both shared, or no path in common."""
    if a.holder.fingerprint == b.holder.fingerprint or (a.shared and b.shared):
        return None
    if a.repo.casefold() != b.repo.casefold():
        return None
    for wanted in a.patterns:
        for pattern in b.patterns:
            if overlaps(wanted, pattern):
                return Conflict(
                    reservation_id=b.reservation_id,
                    holder=b.holder,
                    pattern=pattern,
                    wanted=wanted,
                    shared=b.shared,
                    until=b.until,
                    reason=b.reason,
                )
    return None


def describe_conflict(conflict: Conflict, *, now_ts: float) -> str:
    """One sentence for the person refused: who holds what, for how long, and why."""
    minutes = max(1, math.ceil((conflict.until - now_ts) / 60))
    kind = "shared" if conflict.shared else "exclusively"
    because = f" ({conflict.reason})" if conflict.reason else ""
    return (
        f"{conflict.holder.label} holds {conflict.pattern} {kind} for {minutes} more "
        f"minute{'s' if minutes != 1 else ''}{because}, which overlaps {conflict.wanted}."
    )


class ReservationBook:
    """The reservations of one room, as of op ``last_seq`` of its log and relay time ``clock``."""

    def __init__(self, room_id: str, *, last_seq: int = 0, clock: float = 0.0) -> None:
        self.room_id = room_id
        self._last_seq = last_seq
        self._clock = clock
        self._held: dict[str, Reservation] = {}
        self._outcomes: dict[str, ReservationOutcome] = {}
        self._taken: set[str] = set()

    # --- inputs --------------------------------------------------------------------------------

    def apply(
        self, op: ReservationOp, *, sender: Person, seq: int, relay_ts: float, op_id: str
    ) -> ReservationOutcome:
        """Apply one sequenced reservation op and return what it did.

        Args:
            op: the op from the sealed room op.
            sender: its verified author (fingerprint, and label for display).
            seq: the relay's sequence number for it in this room.
            relay_ts: the relay's timestamp for it (Unix seconds).
            op_id: its envelope id; a retried send keeps it.

        Returns:
            The op's :class:`ReservationOutcome`; for an op id seen before, the recorded one
            with ``duplicate=True``.

        Raises:
            LocalProtocolError: a new op at a seq already passed, or a relay time that is not
                a finite number. Nothing changes.
        """
        self._check_time(relay_ts)
        seen = self._outcomes.get(op_id)
        if seen is not None:
            if seq > self._last_seq:
                self._advance(seq, relay_ts)
            return attrs.evolve(seen, duplicate=True)
        if seq <= self._last_seq:
            raise self._out_of_order(seq)
        self._advance(seq, relay_ts)
        outcome = _HANDLERS[type(op)](self, op, sender, seq, relay_ts, op_id)
        self._outcomes[op_id] = outcome
        if outcome.code in _RESERVE_CODES and outcome.reservation_id is not None:
            self._taken.add(outcome.reservation_id)
        self._lapse()  # a grant or renewal from a relay time behind the clock is already over
        return outcome

    def member_left(self, fingerprint: str, *, seq: int, relay_ts: float) -> tuple[str, ...]:
        """Someone left the room, or was removed, at ``seq``: their reservations lapse.

        Returns:
            The ids of the reservations that lapsed because of it, in the order they were granted.

        Raises:
            LocalProtocolError: ``relay_ts`` is not a finite number.
        """
        self._check_time(relay_ts)
        if seq <= self._last_seq:
            return ()
        self._advance(seq, relay_ts)
        gone = [r for r in self._in_order() if r.holder.fingerprint == fingerprint]
        for reservation in gone:
            del self._held[reservation.reservation_id]
        return tuple(r.reservation_id for r in gone)

    # --- queries -------------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The seq of the last input taken (0 before any)."""
        return self._last_seq

    @property
    def clock(self) -> float:
        """The latest relay time of any input taken: what "now" is for the log's decisions."""
        return self._clock

    def active(self, now_ts: float) -> list[Reservation]:
        """Reservations that hold at relay time ``now_ts`` (``until > now_ts``), oldest grant first.

        ``now_ts`` is a relay time (the latest one the caller has heard), never a local clock.
        """
        return [r for r in self._in_order() if r.until > now_ts]

    def reservation(self, reservation_id: str) -> Reservation | None:
        """The reservation with this id, if it has neither lapsed in the log nor been released."""
        return self._held.get(reservation_id)

    def outcome_of(self, op_id: str) -> ReservationOutcome | None:
        """The outcome of an applied op, or None if it has not been sequenced here yet."""
        return self._outcomes.get(op_id)

    def conflicts(self, wanted: Reservation, *, now_ts: float) -> list[Conflict]:
        """Every active reservation that ``wanted`` would collide with at ``now_ts``: what a
        reserve would be told before it is sent, and what a commit guard checks a path against
        (a one-path exclusive ``wanted``)."""
        found = (conflicting(wanted, held) for held in self.active(now_ts))
        return [c for c in found if c is not None]

    # --- snapshots and hashing -----------------------------------------------------------------

    def snapshot(self) -> ReservationSnapshot:
        """Everything this replica holds, in canonical order, as of ``last_seq``."""
        return ReservationSnapshot(
            room_id=self.room_id,
            last_seq=self._last_seq,
            clock=self._clock,
            reservations=tuple(sorted(self._held.values(), key=lambda r: r.reservation_id)),
            outcomes=tuple(sorted(self._outcomes.values(), key=lambda o: (o.seq, o.op_id))),
        )

    def state_hash(self) -> str:
        """SHA-256 (hex) of the canonical bytes of :meth:`snapshot`: equal iff replicas agree."""
        return hashlib.sha256(canonical_bytes(self.snapshot())).hexdigest()

    @classmethod
    def from_snapshot(cls, snapshot: ReservationSnapshot) -> ReservationBook:
        """Start from a snapshot (already verified by its signature), ready for the log after it.

        Raises:
            RemoteProtocolError: the snapshot contradicts itself; nothing of it is adopted.
        """
        _check_snapshot(snapshot)
        book = cls(snapshot.room_id, last_seq=snapshot.last_seq, clock=snapshot.clock)
        book._held = {r.reservation_id: r for r in snapshot.reservations}
        book._outcomes = {o.op_id: attrs.evolve(o, duplicate=False) for o in snapshot.outcomes}
        book._taken = {
            o.reservation_id
            for o in snapshot.outcomes
            if o.code in _RESERVE_CODES and o.reservation_id is not None
        }
        return book

    # --- the rules -----------------------------------------------------------------------------

    def _reserve(
        self, op: ReservationOp, sender: Person, seq: int, relay_ts: float, op_id: str
    ) -> ReservationOutcome:
        assert isinstance(op, ReserveOp)
        place = (op_id, seq, op.reservation_id)
        if op.reservation_id in self._taken:
            return _done(place, ReservationCode.ALREADY_EXISTS)
        try:
            for pattern in op.patterns:
                parse(pattern)
        except PathspecError as exc:
            return _done(place, ReservationCode.INVALID, detail=str(exc))
        mine = sum(1 for r in self._held.values() if r.holder.fingerprint == sender.fingerprint)
        if mine >= MAX_ACTIVE_PER_HOLDER:
            return _done(place, ReservationCode.OVER_LIMIT)
        wanted = Reservation(
            reservation_id=op.reservation_id,
            repo=op.repo,
            patterns=op.patterns,
            shared=op.shared,
            holder=sender,
            reason=op.reason,
            granted_seq=seq,
            granted_at=relay_ts,
            until=relay_ts + op.minutes * 60,
        )
        blocking = self.conflicts(wanted, now_ts=self._clock)
        if blocking:
            return _done(place, ReservationCode.REFUSED, conflict=blocking[0])
        self._held[wanted.reservation_id] = wanted
        return _done(place, ReservationCode.GRANTED, until=wanted.until)

    def _renew(
        self, op: ReservationOp, sender: Person, seq: int, relay_ts: float, op_id: str
    ) -> ReservationOutcome:
        assert isinstance(op, RenewOp)
        place = (op_id, seq, op.reservation_id)
        held = self._held.get(op.reservation_id)
        if held is None:
            return _done(place, ReservationCode.NOT_FOUND)
        if held.holder.fingerprint != sender.fingerprint:
            return _done(place, ReservationCode.NOT_HOLDER, holder=held.holder)
        renewed = attrs.evolve(held, until=relay_ts + op.minutes * 60)
        self._held[held.reservation_id] = renewed
        return _done(place, ReservationCode.RENEWED, until=renewed.until)

    def _release(
        self, op: ReservationOp, sender: Person, seq: int, relay_ts: float, op_id: str
    ) -> ReservationOutcome:
        assert isinstance(op, ReleaseOp)
        place = (op_id, seq, None)
        try:
            chosen = self._chosen_for_release(op, sender)
        except PathspecError as exc:
            return _done(place, ReservationCode.INVALID, detail=str(exc))
        if chosen:
            for reservation in chosen:
                del self._held[reservation.reservation_id]
            released = tuple(r.reservation_id for r in chosen)
            return _done(place, ReservationCode.RELEASED, released=released)
        others = [self._held[i] for i in op.reservation_ids if i in self._held]
        if others:
            return _done(place, ReservationCode.NOT_HOLDER, holder=others[0].holder)
        return _done(place, ReservationCode.NOT_FOUND)

    def _chosen_for_release(self, op: ReleaseOp, sender: Person) -> list[Reservation]:
        mine = [r for r in self._in_order() if r.holder.fingerprint == sender.fingerprint]
        if op.reservation_ids:
            wanted = set(op.reservation_ids)
            return [r for r in mine if r.reservation_id in wanted]
        repo = op.repo
        if repo is None:
            return mine
        in_repo = [r for r in mine if r.repo.casefold() == repo.casefold()]
        if not op.patterns:
            return in_repo
        given = [parse(p) for p in op.patterns]
        return [r for r in in_repo if any(overlaps(g, p) for g in given for p in r.patterns)]

    # --- internals -----------------------------------------------------------------------------

    def _advance(self, seq: int, relay_ts: float) -> None:
        self._last_seq = seq
        self._clock = max(self._clock, relay_ts)
        self._lapse()

    def _lapse(self) -> None:
        for reservation_id in [i for i, r in self._held.items() if r.until <= self._clock]:
            del self._held[reservation_id]

    def _in_order(self) -> list[Reservation]:
        return sorted(self._held.values(), key=lambda r: (r.granted_seq, r.reservation_id))

    def _check_time(self, relay_ts: float) -> None:
        if isinstance(relay_ts, bool) or not math.isfinite(relay_ts):
            raise LocalProtocolError(f"room {self.room_id}: relay time {relay_ts!r} is not a time")

    def _out_of_order(self, seq: int) -> LocalProtocolError:
        return LocalProtocolError(
            f"room {self.room_id}: reservation op at seq {seq} arrived after seq "
            f"{self._last_seq}; ops must be applied in room-log order."
        )


def _done(
    place: tuple[str, int, str | None], code: ReservationCode, **fields: Any
) -> ReservationOutcome:
    """The outcome of the op at ``place`` (its op id, seq and reservation id)."""
    op_id, seq, reservation_id = place
    return ReservationOutcome(op_id, seq, code, reservation_id, **fields)


def _unique(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise RemoteProtocolError(f"reservation snapshot lists {what} {item!r} twice")
        seen.add(item)


def _check_snapshot(snapshot: ReservationSnapshot) -> None:
    if snapshot.version != RESERVATION_SNAPSHOT_VERSION:
        raise RemoteProtocolError(
            f"reservation snapshot version {snapshot.version} is not supported"
        )
    if snapshot.last_seq < 0 or not math.isfinite(snapshot.clock):
        raise RemoteProtocolError("reservation snapshot has a negative seq or a bad clock")
    _unique((r.reservation_id for r in snapshot.reservations), "reservation")
    _unique((o.op_id for o in snapshot.outcomes), "op")
    if any(o.seq > snapshot.last_seq for o in snapshot.outcomes):
        raise RemoteProtocolError("reservation snapshot holds an outcome after its last_seq")
    for held in snapshot.reservations:
        if held.granted_seq > snapshot.last_seq or held.until <= snapshot.clock:
            raise RemoteProtocolError(
                f"reservation snapshot holds {held.reservation_id!r}, granted after its last_seq "
                f"or lapsed before its clock"
            )


_Handler = Callable[
    [ReservationBook, ReservationOp, Person, int, float, str], ReservationOutcome
]

# op kind -> rule.
_HANDLERS: dict[type, _Handler] = {
    ReserveOp: ReservationBook._reserve,
    RenewOp: ReservationBook._renew,
    ReleaseOp: ReservationBook._release,
}
