"""Restart intensity and backoff for one supervised actor (pure: the caller passes ``now``).

Theory of operation. Each time an actor instance fails (crash or missed heartbeat) the supervisor
calls :meth:`RestartIntensity.failed` with the current time. Restarts that happened less than
``window`` seconds ago are "recent"; older ones are forgotten. If ``max_restarts`` recent restarts
have already happened, this failure would be one too many: the answer is ``None`` and the actor is
marked FAILED. Otherwise the failure becomes a recent restart and the answer is the backoff to wait
before starting the next instance: ``backoff_initial * 2**(recent - 1)``, capped at
``backoff_max``. Because the exponent counts only recent restarts, an actor that has been healthy
for a whole window starts again from ``backoff_initial``.

This follows the Erlang/OTP supervisor rule (more than MaxR restarts in MaxT seconds), measured on
the caller's clock (``trio.current_time()`` in the shell), never on wall time.
"""

from __future__ import annotations

from collections import deque


class RestartIntensity:
    """Counts recent restarts and decides the next backoff, or that the actor has failed."""

    def __init__(
        self,
        *,
        max_restarts: int,
        window: float,
        backoff_initial: float,
        backoff_max: float,
    ) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, not {max_restarts}")
        if window <= 0:
            raise ValueError(f"window must be > 0 seconds, not {window}")
        if not 0 <= backoff_initial <= backoff_max:
            raise ValueError(
                f"need 0 <= backoff_initial <= backoff_max, got {backoff_initial}, {backoff_max}"
            )
        self.max_restarts = max_restarts
        self.window = window
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._recent: deque[float] = deque()

    def recent(self, now: float) -> int:
        """How many restarts happened less than ``window`` seconds before ``now``."""
        self._forget_old(now)
        return len(self._recent)

    def failed(self, now: float) -> float | None:
        """Record a failure at ``now``.

        Returns:
            The seconds to wait before restarting, or ``None`` when restarting would exceed
            ``max_restarts`` restarts within ``window`` seconds.
        """
        self._forget_old(now)
        if len(self._recent) >= self.max_restarts:
            return None
        self._recent.append(now)
        # Cap the exponent too: 2.0**k overflows a float long before any sane max_restarts.
        exponent = min(len(self._recent) - 1, 64)
        return min(self.backoff_initial * 2.0**exponent, self.backoff_max)

    def _forget_old(self, now: float) -> None:
        while self._recent and now - self._recent[0] >= self.window:
            self._recent.popleft()
