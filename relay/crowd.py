"""Authenticated connections per source address and per identity, and which to shed (sans-IO).

Theory of operation
-------------------
The core tells :class:`Crowd` when a connection authenticates (``arrived``), sends a frame
(``active``) and goes (``left``). The crowd keeps, per source address and per identity, that
source's or identity's authenticated connections in order of their last frame, idlest first
(a dict keeps insertion order; a frame moves its connection to the end). ``arrived`` returns
the connections to shed so that, afterwards:

* no identity holds more than ``max_per_identity``: its idlest goes;
* no source holds more than ``max_per_source``: its idlest goes;
* the relay holds at most ``max_authenticated``: the idlest connection of the source holding
  the most goes.

Why the idlest and not the newest. Shedding the newest would keep whatever got in first: a
client whose old connection is dead but not yet noticed (a laptop that slept, a NAT that forgot
it) would be refused on its way back until the heartbeat drops the old one, and a flood that
came first would lock everyone after it out. The newest connection is the one most likely to be
someone's live client; the idlest is the one most likely to be dead or merely held. Counting by
source first means one address competes only with itself: a flood from one address sheds its
own connections, never another address's. At the total cap the largest source pays, so an
address holding a fair share keeps it. An honest daemon is never idle for long: it pings,
acknowledges and resumes; a held connection that wants to stay must keep sending frames,
which its identity's rate limits meter.

Invariant: every connection here is in exactly one source's and one identity's order, and a
source or identity with no connection has no entry (a flood's keys are all gone once it ends).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class CrowdLimits:
    max_per_source: int
    max_per_identity: int
    max_authenticated: int


class Crowd:
    """The authenticated connections, by source and by identity, idlest first."""

    def __init__(self, limits: CrowdLimits) -> None:
        self._limits = limits
        self._by_source: dict[str, dict[int, None]] = {}
        self._by_identity: dict[str, dict[int, None]] = {}
        self._of: dict[int, tuple[str, str]] = {}  # conn -> (source, identity)

    def __len__(self) -> int:
        return len(self._of)

    def arrived(self, conn: int, source: str, fp: str) -> list[int]:
        """``conn`` authenticated as ``fp`` from ``source``; returns the connections to shed
        (already forgotten here), idlest first."""
        self._of[conn] = (source, fp)
        self._by_source.setdefault(source, {})[conn] = None
        self._by_identity.setdefault(fp, {})[conn] = None
        lim = self._limits
        shed: list[int] = []
        while len(self._by_identity[fp]) > lim.max_per_identity:
            shed.append(self._drop(next(iter(self._by_identity[fp]))))
        while len(self._by_source.get(source, ())) > lim.max_per_source:
            shed.append(self._drop(next(iter(self._by_source[source]))))
        while len(self._of) > lim.max_authenticated:
            largest = max(self._by_source.values(), key=len)
            shed.append(self._drop(next(iter(largest))))
        return shed

    def active(self, conn: int) -> None:
        """``conn`` sent a frame: it is now the least idle of its source and identity."""
        where = self._of.get(conn)
        if where is None:
            return
        source, fp = where
        mine = self._by_source[source]
        del mine[conn]
        mine[conn] = None
        theirs = self._by_identity[fp]
        del theirs[conn]
        theirs[conn] = None

    def left(self, conn: int) -> None:
        """``conn`` is gone (or being shed); forgetting an unknown connection does nothing."""
        if conn in self._of:
            self._drop(conn)

    def _drop(self, conn: int) -> int:
        source, fp = self._of.pop(conn)
        for table, key in ((self._by_source, source), (self._by_identity, fp)):
            conns = table[key]
            del conns[conn]
            if not conns:
                del table[key]
        return conn

    def sources(self) -> int:
        return len(self._by_source)
