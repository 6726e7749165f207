"""Wire models for file reservations: the ops people send, the records every replica keeps.

A reservation op travels in the room log like a memory op and is applied in the relay's order by
:class:`crosstalk.core.reservations.ReservationBook`. On the wire it is a JSON object whose
``"op"`` key names its kind (``"reserve"``, ``"reserve_renew"``, ``"reserve_release"``); these tags
differ from every memory op's, and :data:`crosstalk.wire.memory.MemoryOp`'s union includes them:
reservations travel, are sequenced, snapshotted and caught up exactly like tasks. A replica that
predates them refuses such an op as malformed and skips its seq, so its memory still moves on.

Sizes are bounded here, so a peer cannot make every replica compare thousands of long globs: the
validators raise ``ValueError`` with a sentence a person can act on, which
:func:`parse_reservation_op` turns into one ``RemoteProtocolError``. Whether a pattern is a valid
git pathspec is decided by :mod:`crosstalk.core.pathspec` (the wire imports no core); an op with a
pattern it refuses is applied as ``INVALID`` on every replica alike.

Times are the relay's (``relay_ts``, Unix seconds): the author's clock never decides a lapse.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable
from typing import Any, cast

import attrs
from cattrs.errors import BaseValidationError

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, tagged_union
from crosstalk.wire.people import Person

RESERVATION_SNAPSHOT_VERSION = 1
DEFAULT_MINUTES = 60
MAX_MINUTES = 24 * 60
MAX_PATTERNS = 32
MAX_PATTERN_LENGTH = 256
MAX_REASON_LENGTH = 500
MAX_ID_LENGTH = 64
MAX_REPO_LENGTH = 200
MAX_RELEASE_IDS = 64


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    """A tuple of what was given (a typed converter: ``tuple`` itself leaves mypy guessing)."""
    return tuple(value)


def _minutes(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not 1 <= value <= MAX_MINUTES:
        raise ValueError(
            f"a reservation lasts 1 to {MAX_MINUTES} minutes (24 hours), not {value!r}; "
            f"renew it to keep it longer"
        )


def _an_id(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value or len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{attribute.name} must be 1 to {MAX_ID_LENGTH} characters")


def _repo(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    _check_repo(value)


def _check_repo(value: str) -> None:
    if not value.strip() or len(value) > MAX_REPO_LENGTH:
        raise ValueError(f"a repository name is 1 to {MAX_REPO_LENGTH} characters, not {value!r}")


def _reason(_instance: object, _attribute: attrs.Attribute[str], value: str) -> None:
    if len(value) > MAX_REASON_LENGTH:
        raise ValueError(
            f"a reason is at most {MAX_REASON_LENGTH} characters; this one has {len(value)}"
        )


def _check_patterns(patterns: tuple[str, ...], *, at_least: int) -> None:
    if len(patterns) < at_least:
        raise ValueError("name at least one path or glob to reserve")
    if len(patterns) > MAX_PATTERNS:
        raise ValueError(
            f"at most {MAX_PATTERNS} paths or globs at once, not {len(patterns)}; "
            f"a glob such as src/** covers many"
        )
    for pattern in patterns:
        if not pattern or len(pattern) > MAX_PATTERN_LENGTH:
            raise ValueError(
                f"a path or glob is 1 to {MAX_PATTERN_LENGTH} characters; "
                f"{pattern[:40]!r}… has {len(pattern)}"
            )


def _some_patterns(_instance: object, _attribute: attrs.Attribute[Any], value: Any) -> None:
    _check_patterns(value, at_least=1)


# --- ops ---------------------------------------------------------------------------------------


@attrs.frozen
class ReserveOp:
    """Reserve paths and globs of one repository for ``minutes``, exclusively unless ``shared``.

    ``reservation_id`` is chosen by the author (fresh and random, like a task's id): the CLI can
    name the reservation before the relay has sequenced it. ``repo`` is the repository's name as
    facts' ``--in`` tags name it. ``patterns`` are repository-relative git pathspecs.
    """

    reservation_id: str = attrs.field(validator=_an_id)
    repo: str = attrs.field(validator=_repo)
    patterns: tuple[str, ...] = attrs.field(converter=_strings, validator=_some_patterns)
    shared: bool = False
    minutes: int = attrs.field(default=DEFAULT_MINUTES, validator=_minutes)
    reason: str = attrs.field(default="", validator=_reason)


@attrs.frozen
class RenewOp:
    """Keep one's own reservation for ``minutes`` from this op's relay time on."""

    reservation_id: str = attrs.field(validator=_an_id)
    minutes: int = attrs.field(default=DEFAULT_MINUTES, validator=_minutes)


@attrs.frozen
class ReleaseOp:
    """Give back one's own reservations: those named by id; else, in ``repo``, those that overlap
    one of ``patterns``; else all of one's reservations (in ``repo`` if it is given)."""

    reservation_ids: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    repo: str | None = None
    patterns: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def __attrs_post_init__(self) -> None:
        if len(self.reservation_ids) > MAX_RELEASE_IDS:
            raise ValueError(f"release at most {MAX_RELEASE_IDS} reservations by id at once")
        for reservation_id in self.reservation_ids:
            if not reservation_id or len(reservation_id) > MAX_ID_LENGTH:
                raise ValueError(f"a reservation id is 1 to {MAX_ID_LENGTH} characters")
        if self.repo is not None:
            _check_repo(self.repo)
        _check_patterns(self.patterns, at_least=0)
        if self.reservation_ids and self.patterns:
            raise ValueError("release by id or by path, not both at once")
        if self.patterns and self.repo is None:
            raise ValueError("releasing by path needs the repository the paths are in")


ReservationOp = ReserveOp | RenewOp | ReleaseOp

RESERVATION_OP_TAGS: dict[type, str] = {
    ReserveOp: "reserve",
    RenewOp: "reserve_renew",
    ReleaseOp: "reserve_release",
}


# --- records -----------------------------------------------------------------------------------


@attrs.frozen
class Reservation:
    """A granted reservation as every replica keeps it, until it is released or lapses.

    ``until`` is a relay time: the reservation is active at relay time ``t`` exactly when
    ``t < until``.
    """

    reservation_id: str
    repo: str
    patterns: tuple[str, ...]
    shared: bool
    holder: Person
    reason: str
    granted_seq: int
    granted_at: float
    until: float


@attrs.frozen
class Conflict:
    """Why a reserve was refused: whose reservation it collides with, and on which patterns."""

    reservation_id: str
    holder: Person
    pattern: str  # theirs
    wanted: str  # ours, that overlaps it
    shared: bool  # whether theirs is shared (then ours was exclusive)
    until: float
    reason: str


class ReservationCode(enum.Enum):
    """What applying one reservation op did. Every replica computes the same code for an op."""

    GRANTED = "granted"  # the reservation now holds
    REFUSED = "refused"  # it overlaps someone else's; ``conflict`` says whose (CLI: ``reserved``)
    RENEWED = "renewed"  # its ``until`` moved
    RELEASED = "released"  # ``released`` lists the ids given back
    NOT_FOUND = "not_found"  # nothing of the sender's matched (unknown, released or lapsed)
    NOT_HOLDER = "not_holder"  # renew or release of someone else's reservation
    ALREADY_EXISTS = "already_exists"  # a reserve reusing an id an earlier reserve had
    INVALID = "invalid"  # a pattern is not a pathspec we read; ``detail`` says why
    OVER_LIMIT = "over_limit"  # the sender already holds the most reservations one may hold


@attrs.frozen
class ReservationOutcome:
    """The result of one op, kept per op id so the author can answer once it is sequenced.

    ``duplicate`` is True only on the value returned when an applied op arrives again.
    """

    op_id: str
    seq: int
    code: ReservationCode
    reservation_id: str | None = None
    until: float | None = None
    released: tuple[str, ...] = ()
    conflict: Conflict | None = None
    holder: Person | None = None  # for NOT_HOLDER: who holds it
    detail: str = ""
    duplicate: bool = False


@attrs.frozen
class ReservationSnapshot:
    """A room's reservations after op ``last_seq`` (relay clock ``clock``); signed like memory."""

    room_id: str
    last_seq: int
    clock: float
    reservations: tuple[Reservation, ...]
    outcomes: tuple[ReservationOutcome, ...]
    version: int = RESERVATION_SNAPSHOT_VERSION


# --- converter registration --------------------------------------------------------------------

tagged_union(ReservationOp, tag_generator=RESERVATION_OP_TAGS.__getitem__, tag_name="op")


def parse_reservation_op(data: Any) -> ReservationOp:
    """Structure a reservation op received from a peer, or raise one RemoteProtocolError."""
    try:
        return cast(ReservationOp, _op_hook()(data, ReservationOp))
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise RemoteProtocolError(f"malformed reservation op: {exc!r}") from None


@functools.cache
def _op_hook() -> Callable[[Any, Any], Any]:
    """The union's structure hook, looked up once (as :func:`crosstalk.wire.memory._op_hook`)."""
    return converter.get_structure_hook(ReservationOp)
