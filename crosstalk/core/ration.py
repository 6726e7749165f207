"""The ration for self-initiated messages.

Theory of operation
-------------------
An agent that tells you everything is worse than one that tells you nothing, so a message an
agent sends on its own initiative (``--unprompted``) must say why it matters to the recipient and
spends one unit of a per-recipient ration: by default 5 in any rolling hour.

:class:`Ration` is a sliding-window counter per recipient, kept as the send times (float seconds,
given by the shell: use wall-clock seconds if the stamps are persisted). A send at ``t`` uses a
unit while ``now < t + window``; at ``now == t + window`` the unit is free again. A stamp later
than ``now`` (the clock moved back) is counted as if sent at ``now``, so a clock jump can never
hold a unit for longer than one window.

Inputs: :meth:`Ration.check` (may one be sent now? when does the next unit free?) and
:meth:`Ration.spend` (record a send, or refuse it). ``spend`` checks the reason first: a missing
or blank reason is ``needs_reason`` whatever the ration says, then a spent ration is
``ration_spent`` with the time the next unit frees.

The recipient key is opaque to this module: a person key, or a room id for a room send (room
sends are rationed too; the original let them bypass it, behaviour doc §9 item 10).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import attrs

from crosstalk.errors import LocalProtocolError, NeedsReason, RationSpent

DEFAULT_PER_HOUR = 5
HOUR = 3600.0


@attrs.frozen
class RationCheck:
    """Whether a self-initiated message may go to a recipient now.

    Attributes:
        allowed: a unit is free.
        remaining: units free at ``now``.
        frees_at: when the next unit frees if none is free now, else None.
    """

    allowed: bool
    remaining: int
    frees_at: float | None = None


class Ration:
    """Per-recipient sliding-window ration of self-initiated messages."""

    def __init__(
        self,
        *,
        per_window: int = DEFAULT_PER_HOUR,
        window: float = HOUR,
        sent: Mapping[str, Iterable[float]] | None = None,
    ) -> None:
        if per_window < 1 or not math.isfinite(window) or window <= 0:
            raise LocalProtocolError("a ration needs at least one unit and a positive window")
        self.per_window = per_window
        self.window = window
        self._sent: dict[str, list[float]] = {
            who: sorted(stamps) for who, stamps in (sent or {}).items()
        }

    def _in_window(self, recipient: str, now: float) -> list[float]:
        stamps = (min(ts, now) for ts in self._sent.get(recipient, ()))
        return sorted(ts for ts in stamps if now < ts + self.window)

    def check(self, recipient: str, now: float) -> RationCheck:
        """Whether one more self-initiated message may go to ``recipient`` at ``now``."""
        used = self._in_window(recipient, now)
        remaining = max(self.per_window - len(used), 0)
        if remaining:
            return RationCheck(allowed=True, remaining=remaining)
        # The unit that frees first is the one that makes room for one more send.
        frees_at = used[len(used) - self.per_window] + self.window
        return RationCheck(allowed=False, remaining=0, frees_at=frees_at)

    def spend(self, recipient: str, reason: str | None, now: float, *, label: str = "") -> None:
        """Record a self-initiated message to ``recipient`` at ``now``, or refuse it.

        Args:
            recipient: the opaque recipient key.
            reason: why it matters to them (``--because``).
            now: the send time.
            label: the recipient's name for the error sentence (defaults to the key).

        Raises:
            NeedsReason: ``reason`` is missing or blank.
            RationSpent: the ration for ``recipient`` is used up; the message says when it frees.
        """
        name = label or recipient
        if reason is None or not reason.strip():
            raise NeedsReason(
                f"A message you start on your own must say why it matters to {name}: "
                "add a one-line reason (--because)."
            )
        verdict = self.check(recipient, now)
        if verdict.frees_at is not None:
            wait = _minutes(verdict.frees_at - now)
            raise RationSpent(
                f"You have used all {self.per_window} self-initiated messages to {name} "
                f"for this hour; the next one frees in {wait}."
            )
        kept = self._in_window(recipient, now)
        self._sent[recipient] = [*kept, now]

    def stamps(self) -> dict[str, list[float]]:
        """The send times per recipient, for the shell to persist."""
        return {who: list(stamps) for who, stamps in self._sent.items() if stamps}

    def forget_before(self, now: float) -> None:
        """Drop stamps that no longer use a unit at ``now`` (keeps the state small)."""
        for who in list(self._sent):
            kept = self._in_window(who, now)
            if kept:
                self._sent[who] = kept
            else:
                del self._sent[who]


def _minutes(seconds: float) -> str:
    """A short human duration, rounded up to the next whole minute (never "0 minutes")."""
    whole = max(math.ceil(seconds / 60.0), 1)
    return "1 minute" if whole == 1 else f"{whole} minutes"
