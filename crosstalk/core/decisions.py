"""DECISIONS.md text: what a repository's decision log looks like after one more decision.

Theory of operation
-------------------
``crosstalk decide`` appends a decision to ``DECISIONS.md`` at the repository root. The daemon reads
the file (None when it does not exist), calls :func:`append_decision`, and writes the result back
under a lock (that concurrency-safe append is the daemon's job, not this module's). This module
only produces text, so the format is fixed in one place and tested exactly:

    # Decisions

    Settled decisions for this repository, appended by crosstalk, newest last.

    ## Use snake_case in every API response

    - Who: marie
    - When: 2026-11-29 07:45 UTC
    - Why: the mobile clients already expect it

Each entry is a level-two heading and a list; ``Why`` is left out when no reason was given. The
file's existing text is kept byte for byte, except that its trailing whitespace is replaced by
exactly one blank line before the new entry. Text, who and why are sender-controlled: newlines
and other whitespace runs in them collapse to single spaces, so a decision cannot forge extra
headings or entries.
"""

from __future__ import annotations

import datetime as dt

from crosstalk.errors import LocalProtocolError

HEADER = (
    "# Decisions\n\nSettled decisions for this repository, appended by crosstalk, newest last.\n"
)


def one_line(text: str) -> str:
    """Collapse every run of whitespace (newlines included) to one space and trim the ends."""
    return " ".join(text.split())


def format_when(when_utc: str) -> str:
    """Turn an ISO 8601 UTC time into ``YYYY-MM-DD HH:MM UTC``.

    Raises:
        LocalProtocolError: the string is not ISO 8601, or carries no UTC offset or another one.
    """
    try:
        moment = dt.datetime.fromisoformat(when_utc)
    except ValueError:
        raise LocalProtocolError(f"decision time {when_utc!r} is not ISO 8601") from None
    if moment.utcoffset() != dt.timedelta(0):
        raise LocalProtocolError(f"decision time {when_utc!r} is not marked as UTC")
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def decision_entry(*, text: str, why: str, who: str, when_utc: str) -> str:
    """One entry: heading, who, when (UTC) and why, ending with a newline."""
    lines = [
        f"## {one_line(text)}",
        "",
        f"- Who: {one_line(who)}",
        f"- When: {format_when(when_utc)}",
    ]
    reason = one_line(why)
    if reason:
        lines.append(f"- Why: {reason}")
    return "\n".join(lines) + "\n"


def append_decision(existing: str | None, *, text: str, why: str, who: str, when_utc: str) -> str:
    """The new DECISIONS.md text after appending one decision.

    Args:
        existing: the file's current text, or None when the file does not exist. A file that is
            empty or only whitespace gets the heading too.
        text: what was decided.
        why: the reason ("" when none was given).
        who: who decided, as the room knows them.
        when_utc: the time, ISO 8601 in UTC (``2026-11-29T07:45:00Z`` or ``…+00:00``).
    """
    entry = decision_entry(text=text, why=why, who=who, when_utc=when_utc)
    if existing is None or not existing.strip():
        return f"{HEADER}\n{entry}"
    return f"{existing.rstrip()}\n\n{entry}"
