"""Which fetched rosters the membership actor has applied, and who waits for one.

Rosters reach the store in one place only, the membership actor's inbox, in the order the relay
sent them on the link's one websocket: a ``roster`` push and the reply to a ``roster`` request
alike (the link's boss reports such a reply as news before it answers the request). So whoever
fetches a roster does not apply the reply it gets: it waits until the actor has applied the
roster carrying that request's ``req``. A reply applied on its own would land out of the
relay's order, and a stale one would overwrite a newer push (seed 288 of the simulation: an
invite's fetched roster, taken before a member joined, undid the push that said they had).

The reply reaches the caller before, or after, its news reaches the actor; both orders are
handled: a waiter for a ``req`` already applied is told at once (the last few are kept), any
other waits until it is. Waiters bound their own waits, so one whose news was lost (the router
restarting in between) times out instead of hanging; the few a caller gave up on are dropped
oldest first.
"""

from __future__ import annotations

from collections import deque

import trio

RECENT = 64
"""How many applied ``req`` numbers are remembered for a waiter that comes after its roster."""
MAX_WAITERS = 64


class AnsweredRosters:
    """The ``req`` numbers of the fetched rosters applied lately, and the waiters for others."""

    def __init__(self) -> None:
        self._recent: deque[int] = deque(maxlen=RECENT)
        self._waiters: dict[int, list[trio.MemorySendChannel[None]]] = {}

    def applied(self, req: int) -> None:
        """The roster answering request ``req`` is committed: tell whoever waits for it."""
        self._recent.append(req)
        for reply in self._waiters.pop(req, []):
            _tell(reply)

    def wait_for(self, req: int, reply: trio.MemorySendChannel[None]) -> None:
        """Tell ``reply`` (buffer >= 1) once the roster answering ``req`` is applied."""
        if req in self._recent:
            _tell(reply)
            return
        self._waiters.setdefault(req, []).append(reply)
        while len(self._waiters) > MAX_WAITERS:
            del self._waiters[next(iter(self._waiters))]  # a caller long gone


def _tell(reply: trio.MemorySendChannel[None]) -> None:
    try:
        reply.send_nowait(None)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the waiter gave up; nothing to do
