"""Timed mutes: hold inbound from someone for a while.

Theory of operation
-------------------
``crosstalk mute [WHO] [MINUTES]`` is a *timed hold*, unlike the ``mute`` trust level (which
drops). :class:`MuteState` maps a key to the time its mute ends. A key is a person key (a
fingerprint, or ``post:<name>`` for a local post source), a relay room id, or
:data:`EVERYONE`. Something from a person in a room is muted while any of those three keys is.

Time is an input: every query takes ``now`` (float seconds, the shell's clock; persisted mutes
need wall-clock seconds). A mute covers ``now`` while ``now < until``; at ``now == until`` it has
ended. ``MINUTES`` of ``0`` lifts the mute on that key; lifting :data:`EVERYONE` lifts every
mute. Muting a key again replaces its end time (it is "for N minutes from now", not a sum).

Local posts can be muted like anyone else (the original could not mute ``post``, behaviour doc
§9 item 10).

The state is an immutable value: :meth:`MuteState.mute` returns an updated copy for the shell
to persist. Expired entries are harmless; :meth:`MuteState.pruned` drops them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

from crosstalk.errors import UsageError

EVERYONE = "*"
"""The key that mutes every source at once (``crosstalk mute`` with no WHO)."""
MAX_MINUTES = 366 * 24 * 60
"""The longest timed mute, a year: its end must be a time a clock can show (``1e308`` minutes
is finite, but its end is not). For good, there is the ``mute`` trust level."""


def _copy(value: Mapping[str, float]) -> dict[str, float]:
    return dict(value)


@attrs.frozen
class MuteState:
    """Who is muted until when.

    Attributes:
        until: key -> the time (seconds, the shell's clock) the mute on it ends.
    """

    until: dict[str, float] = attrs.field(factory=dict, converter=_copy)

    def mute(self, who: str, minutes: float, now: float) -> MuteState:
        """A copy with ``who`` muted for ``minutes`` from ``now``; ``0`` lifts it.

        Raises:
            UsageError: ``minutes`` is negative, not a finite number, or past :data:`MAX_MINUTES`.
        """
        if not math.isfinite(minutes) or minutes < 0:
            raise UsageError(f"{minutes!r} is not a number of minutes: use 0 or more (0 unmutes).")
        if minutes > MAX_MINUTES:
            raise UsageError(
                f"{minutes:g} minutes is longer than a year: mute for at most {MAX_MINUTES} "
                "minutes, or use the trust level mute (`crosstalk trust WHO mute`)."
            )
        if minutes == 0:
            return self.lift(who)
        return MuteState({**self.until, who: now + minutes * 60.0})

    def lift(self, who: str) -> MuteState:
        """A copy with the mute on ``who`` removed; lifting :data:`EVERYONE` removes every mute."""
        if who == EVERYONE:
            return MuteState()
        return MuteState({key: end for key, end in self.until.items() if key != who})

    def is_muted(self, who: str, now: float) -> bool:
        """Whether the mute on key ``who`` itself covers ``now``."""
        end = self.until.get(who)
        return end is not None and now < end

    def covers(self, person: str, room: str | None, now: float) -> bool:
        """Whether something from ``person`` arriving in ``room`` is muted at ``now``."""
        return self.ends_at(person, room, now) is not None

    def ends_at(self, person: str, room: str | None, now: float) -> float | None:
        """When the mutes covering ``person`` in ``room`` all end, or None if none covers now."""
        keys = [person, EVERYONE] if room is None else [person, room, EVERYONE]
        ends = [self.until[key] for key in keys if self.is_muted(key, now)]
        return max(ends) if ends else None

    def active(self, now: float) -> dict[str, float]:
        """The mutes still in force at ``now`` (for ``crosstalk mute`` output)."""
        return {key: end for key, end in self.until.items() if now < end}

    def pruned(self, now: float) -> MuteState:
        """A copy without the mutes that have ended by ``now``."""
        return MuteState(self.active(now))
