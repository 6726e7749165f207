"""A level-triggered wake-up that can never be lost or block the one who rings.

A room's actor is told "something new may be in the store" by whoever committed it (the router
for inbound ops, membership after a roster change). Sending a ``Wake`` message into the room's
bounded inbox could block the router behind one busy room, and dropping it when the inbox was
full lost the wake when the inbox was full of *other* messages (sends). A doorbell is a pending
flag and one event: any number of rings before a ``wait`` count as one, a ring is never
dropped, and ``ring`` never blocks. The daemon owns each room's doorbell, so it outlives the
actor's restarts: a ring while the actor restarts is still pending when it comes back.
"""

from __future__ import annotations

import trio


class Doorbell:
    """Ring any number of times; ``wait`` returns once per batch of rings."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def ring(self) -> None:
        """Mark that there is something to look at (never blocks, never lost)."""
        self._event.set()

    def pending(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        """Return once the bell has rung since the last ``wait`` returned."""
        await self._event.wait()
        self._event = trio.Event()
