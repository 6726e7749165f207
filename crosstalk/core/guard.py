"""The commit guard's decision: staged paths against the reservations others hold.

Theory of operation
-------------------
``crosstalk guard install`` puts a git pre-commit hook in place; it runs ``crosstalk guard
check``, whose shell (:mod:`crosstalk.cli.guard_check`) gathers three things and hands them here:

- the staged paths, from ``git diff --cached --name-only --no-renames -z`` (:func:`split_paths`:
  NUL-separated, so names with spaces, newlines, leading dashes or any bytes come through whole;
  ``--no-renames`` lists both sides of a rename, as a deletion and an addition);
- the repository's name (its root's basename) and
- the daemon's ``reservations`` reply (:func:`parse_reply`): every reservation this identity
  sees, with ``mine`` and ``shared`` flags, and the daemon's ``now``.

:func:`find_conflicts` keeps each reservation that is someone else's (``mine`` false), exclusive
(``shared`` false), in a repository of the same name (compared case-insensitively, as the
reservation book compares repositories), still running (``until > now``), and has at least one
pattern that names a staged path (:func:`crosstalk.core.pathspec.matches`, git's ``:(glob)``
rules). Any such conflict refuses the commit; :func:`refusal_message` says who holds what, until
when, why, and how to commit anyway once (``CROSSTALK_GUARD=off``).

:func:`guard_disabled` reads the override. The shell asks in this order: the override
(:func:`skipped`), then the staged paths (none: nothing to check), then the daemon (unreachable,
no identity, an op it lacks, an error or no answer within a few seconds: :func:`unchecked`, a
warning, and the commit goes ahead), then :func:`decide`. Everything but the asking is here,
and tested on its own.

Decisions (ours): a pattern that does not parse names nothing (the book never grants one, so it
can only come from a damaged reply, and a damaged reply must not block every commit). Peer text
(holder labels, reasons) and staged paths are shown on one line each, control characters
escaped, so nothing a peer wrote or a file was called can forge a line of the message.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from crosstalk.core.pathspec import PathspecError, matches
from crosstalk.errors import RemoteProtocolError

#: The environment variable that turns the guard off for one commit, and the values that do.
OVERRIDE_ENV = "CROSSTALK_GUARD"
OVERRIDE_VALUES = frozenset({"off", "0", "false", "no"})
#: How the message tells people to skip the guard once.
OVERRIDE_HINT = "CROSSTALK_GUARD=off git commit …"
#: Staged paths named per conflict before "and N more".
SHOWN_PATHS = 5


@attrs.frozen
class HeldReservation:
    """One reservation as the daemon's ``reservations`` op reports it."""

    id: str
    holder: str
    paths: tuple[str, ...]
    repo: str
    until: float
    shared: bool
    mine: bool
    reason: str = ""


@attrs.frozen
class Reservations:
    """The daemon's reply: what is held, and the daemon's clock when it answered."""

    held: tuple[HeldReservation, ...]
    now: float


@attrs.frozen
class Conflict:
    """A reservation that refuses the commit, and the staged paths it names (in staged order)."""

    reservation: HeldReservation
    staged: tuple[str, ...]


class Outcome(enum.Enum):
    """What the check decided."""

    SKIPPED = "skipped"  # CROSSTALK_GUARD=off
    UNCHECKED = "unchecked"  # the daemon could not be asked: warn, let the commit through
    CLEAR = "clear"  # nothing staged touches what someone else holds
    REFUSED = "refused"  # it does: the commit stops


@attrs.frozen
class Verdict:
    """The check's decision, the conflicts behind a refusal and the one message to print."""

    outcome: Outcome
    conflicts: tuple[Conflict, ...] = ()
    message: str = ""


# --- inputs ------------------------------------------------------------------------------------


def guard_disabled(value: str | None) -> bool:
    """Whether the override's value (``CROSSTALK_GUARD``) turns the guard off."""
    return value is not None and value.strip().lower() in OVERRIDE_VALUES


def split_paths(output: bytes) -> tuple[str, ...]:
    """The paths in git's ``-z`` output (each ended by NUL), decoded as the OS names files.

    Bytes that are not UTF-8 decode to lone surrogates (``surrogateescape``, what
    ``os.fsdecode`` does), so such a name still matches a pattern spelled the same way.
    """
    parts = output.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return tuple(p.decode("utf-8", "surrogateescape") for p in parts if p)


def parse_reply(reply: Mapping[str, object]) -> Reservations:
    """The ``reservations`` op's reply as :class:`Reservations`.

    Raises:
        RemoteProtocolError: the reply does not have the shape the op promises.
    """
    rows = reply.get("reservations")
    if not isinstance(rows, list):
        raise RemoteProtocolError("The daemon's reservations reply has no list of reservations.")
    return Reservations(held=tuple(_parse_row(row) for row in rows), now=_number(reply, "now"))


def _number(row: Mapping[str, object], key: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RemoteProtocolError(f"The daemon's reservations reply has no number {key!r}.")
    return float(value)


def _text(row: Mapping[str, object], key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise RemoteProtocolError(f"A reservation in the daemon's reply has no text {key!r}.")
    return value


def _flag(row: Mapping[str, object], key: str) -> bool:
    value = row.get(key)
    if not isinstance(value, bool):
        raise RemoteProtocolError(f"A reservation in the daemon's reply has no flag {key!r}.")
    return value


def _parse_row(row: object) -> HeldReservation:
    if not isinstance(row, dict):
        raise RemoteProtocolError("A reservation in the daemon's reply is not an object.")
    paths = row.get("paths")
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise RemoteProtocolError("A reservation in the daemon's reply has no list of paths.")
    reason = row.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise RemoteProtocolError("A reservation in the daemon's reply has a reason not text.")
    return HeldReservation(
        id=_text(row, "id"),
        holder=_text(row, "holder"),
        paths=tuple(paths),
        repo=_text(row, "repo"),
        until=_number(row, "until"),
        shared=_flag(row, "shared"),
        mine=_flag(row, "mine"),
        reason=reason or "",
    )


# --- the decision ------------------------------------------------------------------------------


def blocks(reservation: HeldReservation, *, repo: str, now: float) -> bool:
    """Whether ``reservation`` may refuse a commit in ``repo`` at ``now``: someone else's,
    exclusive, in a repository of that name, not yet run out."""
    return (
        not reservation.mine
        and not reservation.shared
        and reservation.repo.casefold() == repo.casefold()
        and reservation.until > now
    )


def _names(pattern: str, path: str) -> bool:
    try:
        return matches(pattern, path)
    except PathspecError:
        return False  # see "Decisions" in the module doc


def find_conflicts(
    staged: Sequence[str], reservations: Reservations, *, repo: str
) -> tuple[Conflict, ...]:
    """Each reservation that refuses committing ``staged`` in ``repo``, in the reply's order."""
    found = []
    for reservation in reservations.held:
        if not blocks(reservation, repo=repo, now=reservations.now):
            continue
        named = tuple(p for p in staged if any(_names(q, p) for q in reservation.paths))
        if named:
            found.append(Conflict(reservation, named))
    return tuple(found)


def decide(
    staged: Sequence[str],
    reservations: Reservations,
    *,
    repo: str,
    local_time: Callable[[float], str],
) -> Verdict:
    """Refuse or clear committing ``staged`` in ``repo`` against the daemon's ``reservations``.

    Args:
        staged: the staged paths, repository-relative.
        reservations: the daemon's reply.
        repo: the repository's name (its root's basename).
        local_time: renders a unix time as local clock time, for the message.
    """
    conflicts = find_conflicts(staged, reservations, repo=repo)
    if not conflicts:
        return Verdict(Outcome.CLEAR)
    message = refusal_message(conflicts, now=reservations.now, local_time=local_time)
    return Verdict(Outcome.REFUSED, conflicts, message)


def skipped() -> Verdict:
    """The verdict when the override is set: nothing checked, one line saying so."""
    return Verdict(
        Outcome.SKIPPED,
        message=f"crosstalk guard: off for this commit ({OVERRIDE_ENV}=off); "
        "reservations not checked.",
    )


def unchecked(reason: str) -> Verdict:
    """The verdict when the daemon could not be asked: a one-line warning; the commit goes on."""
    return Verdict(
        Outcome.UNCHECKED,
        message=f"crosstalk guard: could not check reservations ({one_line(reason).rstrip('.')}); "
        "committing without the check.",
    )


# --- messages ----------------------------------------------------------------------------------

_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}


def one_line(text: str) -> str:
    """``text`` with C0 control characters and DEL escaped (``\\x0a``), so it stays one line."""
    return text.translate(_CONTROL)


def minutes_left(until: float, now: float) -> int:
    """Whole minutes until ``until``, rounded up (a reservation still running shows at least 1)."""
    return max(1, math.ceil((until - now) / 60))


def _listed(paths: Iterable[str]) -> str:
    shown = list(paths)
    more = len(shown) - SHOWN_PATHS
    text = ", ".join(one_line(p) for p in shown[:SHOWN_PATHS])
    return f"{text} and {more} more" if more > 0 else text


def refusal_message(
    conflicts: Sequence[Conflict], *, now: float, local_time: Callable[[float], str]
) -> str:
    """The one message a refused commit prints: each holder, their paths, until when (local time
    and minutes left) and why, the staged paths they name, and the override."""
    lines = ["This commit touches paths someone else has reserved:"]
    for conflict in conflicts:
        held = conflict.reservation
        reason = f"; reason: {one_line(held.reason)}" if held.reason else ""
        lines.append(
            f"  {one_line(held.holder)} holds {_listed(held.paths)} until "
            f"{local_time(held.until)} ({minutes_left(held.until, now)} min left{reason})"
        )
        lines.append(f"    staged here: {_listed(conflict.staged)}")
    holders = sorted({one_line(c.reservation.holder) for c in conflicts})
    lines.append(f"Talk to {' and '.join(holders)} first (crosstalk send), or wait for a release.")
    lines.append(f"To commit anyway, this once: {OVERRIDE_HINT}")
    return "\n".join(lines)
