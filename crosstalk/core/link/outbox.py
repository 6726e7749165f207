"""The relay link's outbox: durable posts, sent in order, one per room in flight, retried.

Theory of operation
-------------------
The outbox holds every committed post the relay has not taken yet (loaded from the store, then
``add``-ed as the shell commits new ones). While the link is READY the boss calls ``pump``, which
sends the first item of every room that is neither busy (a post in flight) nor paused. Invariants:

* Order: items leave in id order, at most one ``post`` per room in flight, so a room's ops reach
  the relay in the order they were queued even when one is refused for a while. Other rooms keep
  flowing.
* An item leaves only on ``posted`` (:class:`~crosstalk.core.link.events.PostAccepted`) or a
  permanent refusal (:class:`~crosstalk.core.link.events.PostRejected`). A transient refusal
  (``rate_limited``, ``backlog_full``) pauses the room for 1, 2, 4 … 30 s
  (:func:`~crosstalk.core.link.common.post_retry_delay`), then the same item goes again.
* A post in flight when the connection drops is sent again on the next one; the relay answers a
  repeated ``op_id`` with the seq it already gave, so nothing is posted twice. If the resume's
  replay brings the op back first (``came_back``), that is its answer: the item leaves then, so
  it is not posted again after, say, a leave that would have it refused as from a non-member
  though it was sequenced and read (sim seed 3116).
* Never under an outdated key: every inbound op shows (outside its seal) the epoch it is sealed
  under, and the outbox keeps each room's newest (``epoch_seen``). An item sealed under an older
  epoch is held: the outbox asks (:class:`ResealWanted`) to have it sealed anew under our newest
  key, and asks again every ``RESEAL_RETRY`` while the answer is "not yet" (the rekey or share
  that brings the key may still be on its way). The room's later items wait behind it, except a
  ``pinned`` one (an op that carries keys, which must stay under its epoch): it goes, since it
  may be what brings us the key (a joiner's naming of itself makes members share newer keys; the
  simulation's seed 2877 waited for ever behind its own held memory request). Posted under the
  old epoch, an item would be sequenced after members who joined under the new one, who can
  never open it, while the member the rekey removed still could (seed 1516: a daemon back from a
  long cut posted what it had queued before the relay's replay told it of a kick and a join).
  Not closed: a rekey sequenced while our post is already in flight.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from crosstalk.core.link.common import (
    RESEAL_RETRY,
    TRANSIENT_POST_ERRORS,
    OutboxItem,
    ReqNumbers,
    Resealed,
    post_retry_delay,
    relay_error,
)
from crosstalk.core.link.events import PostAccepted, PostRejected, ResealWanted
from crosstalk.errors import RemoteProtocolError
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import body_epoch


class Outbox:
    """Posts not yet taken by the relay (see the module docstring).

    Args:
        items: the durable outbox rows still to send, in any order.
        reqs: the link's ``req`` counter (the boss owns it).
        through: the highest outbox id committed when ``items`` were loaded; ``add`` ignores an
            item up to it (it is in ``items``, or it left the outbox before they were loaded).
    """

    def __init__(
        self, items: Iterable[OutboxItem], *, reqs: ReqNumbers, through: int = 0
    ) -> None:
        self._reqs = reqs
        self._through = through
        self._queued = {item.id: item for item in sorted(items, key=lambda i: i.id)}
        self._in_flight: dict[int, OutboxItem] = {}  # req -> item
        self._paused: dict[str, float] = {}  # room -> when it may flow again
        self._failures: dict[str, int] = {}  # room -> transient refusals in a row
        self._newest: dict[str, int] = {}  # room -> newest epoch an inbound op was sealed under
        self._as_is: set[str] = set()  # op ids that go under the epoch they were sealed for
        self._asks: list[ResealWanted] = []
        self._ask_again: dict[int, float] = {}  # item id -> when to ask again to seal it anew

    @property
    def queued(self) -> int:
        """Items not yet taken by the relay."""
        return len(self._queued)

    def rooms(self) -> set[str]:
        """The rooms with an item not yet taken by the relay."""
        return {item.room for item in self._queued.values()}

    def add(self, item: OutboxItem) -> None:
        """A post is committed to the outbox; it goes when its turn comes (one already here,
        or loaded with the rest: a restart between its commit and its hand-over, is ignored)."""
        if item.id in self._queued or item.id <= self._through:
            return
        last = next(reversed(self._queued), None)
        self._queued[item.id] = item
        if last is not None and item.id < last:  # rare: ids come in commit order; keep id order
            self._queued = dict(sorted(self._queued.items()))

    def came_back(self, op: w.Op) -> PostAccepted | None:
        """Our own op ``op`` came from the relay (a replay: the answer to its post was lost).
        The item it was leaves the outbox, taken at ``op.seq``."""
        for req, item in list(self._in_flight.items()):
            if item.op_id == op.op_id and item.room == op.room:
                del self._in_flight[req]  # its late answer, if any, matches nothing
        for item in self._queued.values():
            if item.op_id == op.op_id and item.room == op.room:
                del self._queued[item.id]
                self._ask_again.pop(item.id, None)
                self._as_is.discard(item.op_id)
                self._failures.pop(item.room, None)
                return PostAccepted(item, op.seq, op.ts)
        return None

    def epoch_seen(self, room: str, body: bytes) -> None:
        """An op of ``room`` came in: note the epoch it is sealed under."""
        epoch = body_epoch(body)
        if epoch is not None and epoch > self._newest.get(room, -1):
            self._newest[room] = epoch

    def asks(self) -> list[ResealWanted]:
        """The items to seal anew that ``pump`` found since the last call."""
        asks, self._asks = self._asks, []
        return asks

    def resealed(self, asked: OutboxItem, answer: Resealed) -> None:
        """The answer to a :class:`ResealWanted`: the item anew, as it is, or not yet."""
        if answer.item is None and not answer.as_is:
            return  # no newer key here yet: asked again at its time
        self._ask_again.pop(asked.id, None)
        if answer.item is None:
            self._as_is.add(asked.op_id)
        elif asked.id in self._queued:  # (else it left meanwhile)
            self._queued[asked.id] = answer.item

    def pump(self, now: float) -> list[w.Post]:
        """The posts to send now: each free room's first item that may go (call only while
        READY); items to seal anew are asked for (``asks``)."""
        out = []
        taken = {item.room for item in self._in_flight.values()}
        held: set[str] = set()  # rooms with an item that waits to be sealed anew
        for item in self._queued.values():
            room = item.room
            if room in taken or self._paused.get(room, -math.inf) > now:
                continue
            if self._outdated(item):
                held.add(room)
                if self._ask_again.get(item.id, -math.inf) <= now:
                    self._asks.append(ResealWanted(item))
                    self._ask_again[item.id] = now + RESEAL_RETRY
                continue
            if room in held and not item.pinned:
                continue  # behind one that waits: the room's order holds
            taken.add(room)
            req = self._reqs.take()
            self._in_flight[req] = item
            out.append(w.Post(req, item.room, item.op_id, item.body))
        return out

    def owns(self, req: int) -> bool:
        return req in self._in_flight

    def _outdated(self, item: OutboxItem) -> bool:
        newest = self._newest.get(item.room)
        if newest is None or item.pinned or item.op_id in self._as_is:
            return False
        epoch = body_epoch(item.body)
        return epoch is not None and epoch < newest

    def answered(
        self, req: int, frame: w.RelayFrame, now: float
    ) -> PostAccepted | PostRejected | None:
        """The relay's answer to post ``req`` (check ``owns`` first); ``None``: paused.

        Raises:
            RemoteProtocolError: the relay answered a post with neither posted nor error.
        """
        item = self._in_flight.pop(req)
        if isinstance(frame, w.Posted) and frame.room == item.room:
            self._queued.pop(item.id, None)
            self._as_is.discard(item.op_id)
            self._failures.pop(item.room, None)
            return PostAccepted(item, frame.seq, frame.ts)
        if isinstance(frame, w.Error) and frame.code in TRANSIENT_POST_ERRORS:
            failures = self._failures[item.room] = self._failures.get(item.room, 0) + 1
            self._paused[item.room] = now + post_retry_delay(failures)
            return None
        if isinstance(frame, w.Error):
            self._queued.pop(item.id, None)
            self._as_is.discard(item.op_id)
            return PostRejected(item, relay_error(frame))
        raise RemoteProtocolError(f"the relay answered post with {w.tag_of(frame)}")

    def lost(self) -> None:
        """The connection dropped: posts in flight go again on the next one (and what waits to
        be sealed anew is asked for again then)."""
        self._in_flight.clear()
        self._ask_again.clear()

    def expire(self, now: float) -> None:
        """Rooms whose pause is over may flow again; items held for a newer key are asked for
        again."""
        for room in [r for r, until in self._paused.items() if until <= now]:
            del self._paused[room]
        for item_id in [i for i, when in self._ask_again.items() if when <= now]:
            del self._ask_again[item_id]

    def next_deadline(self) -> float:
        """When the first paused room may flow again, or a held item be asked for again (inf
        with neither)."""
        return min(min(self._paused.values(), default=math.inf),
                   min(self._ask_again.values(), default=math.inf))
