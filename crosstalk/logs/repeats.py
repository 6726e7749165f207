"""When to log a condition that may hold for hours: once when it begins or changes, then a
summary now and then, never once per retry.

Theory of operation
-------------------
A shell that retries something (publish presence into a room, redial the relay, ask for a
memory snapshot) meets the same failure on every round. Logging each round wrote one line a
second for as long as the condition lasted: a member removed from a room filled ``daemon.log``
with about 18 MB a day of the same sentence (issue 38). So the shell asks :class:`Repeats`
before it logs:

* :meth:`Repeats.seen` ``(key, state, now)``: the condition ``state`` holds for ``key`` (a room,
  a relay URL). The answer is a :class:`Say` when a line is due, else None:

  - the first time ``key`` is seen in ``state`` (new, or changed from another state): a full
    line (``Say.first``);
  - afterwards, at most one summary per ``every`` seconds while it lasts, counting the times it
    was seen since the last line (``Say.times``, this one included).

* :meth:`Repeats.cleared` ``(key)``: the condition is over (the post went through, the link is
  up). The next :meth:`seen` of ``key`` is new again. Returns how many times it was seen since
  the last line, for a shell that wants to say so.

No I/O and no clock: ``now`` is an input (float seconds, any monotonic origin), so tests drive
it with plain numbers. Keys are bounded: past ``keep`` of them the one said longest ago is
forgotten (it is merely logged in full again if it comes back).
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

SUMMARY_EVERY = 3600.0
"""Seconds between two summaries of a condition that does not change."""
KEEP = 256
"""Conditions remembered at once (rooms, relays); the one said longest ago goes first."""


@attrs.frozen
class Say:
    """A line is due about a condition.

    Attributes:
        first: the condition is new (or changed): log it in full.
        times: how many times it was seen since the last line, this one included (1 when
            ``first``).
        over: seconds since the last line about it (0.0 when ``first``).
    """

    first: bool
    times: int = 1
    over: float = 0.0

    @property
    def note(self) -> str:
        """What to add to the line: nothing for the first, else ``" (still; 3600 times in the
        last 60 min)"``."""
        if self.first:
            return ""
        return f" (still; {self.times} times in the last {_span(self.over)})"


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@attrs.define
class _Held:
    state: str
    said_at: float
    times: int = 0  # seen since the last line


class Repeats:
    """Log-once-per-change bookkeeping for one kind of condition (see the module docstring).

    Args:
        every: seconds between summaries while a condition lasts (must be positive).
        keep: conditions remembered at once.
    """

    def __init__(self, *, every: float = SUMMARY_EVERY, keep: int = KEEP) -> None:
        if not every > 0:
            raise ValueError(f"every must be positive, not {every!r}")
        self.every = every
        self._keep = keep
        self._held: dict[Hashable, _Held] = {}  # in the order they were last said

    def seen(self, key: Hashable, state: str, now: float) -> Say | None:
        """``state`` holds for ``key`` at ``now``: a :class:`Say` if a line is due, else None."""
        held = self._held.get(key)
        if held is None or held.state != state:
            self._remember(key, _Held(state, now))
            return Say(first=True)
        held.times += 1
        if now - held.said_at < self.every:
            return None
        say = Say(first=False, times=held.times, over=now - held.said_at)
        self._remember(key, _Held(state, now))
        return say

    def cleared(self, key: Hashable) -> int | None:
        """``key``'s condition is over; how many times it was seen since its last line (None
        if it was not held)."""
        held = self._held.pop(key, None)
        return None if held is None else held.times

    def holding(self, key: Hashable) -> str | None:
        """The state held for ``key``, if any."""
        held = self._held.get(key)
        return None if held is None else held.state

    def _remember(self, key: Hashable, held: _Held) -> None:
        self._held.pop(key, None)
        self._held[key] = held
        while len(self._held) > self._keep:
            del self._held[next(iter(self._held))]
