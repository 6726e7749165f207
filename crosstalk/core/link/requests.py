"""The relay link's requests: held until the link is ready, matched to replies, timed out.

Theory of operation
-------------------
A request is a frame (create, accept, list_rooms, slot_open …) and a caller's token. It is
*held* while the link is not READY and *pending* once sent, under a fresh ``req`` from the link's
counter (the caller's own ``req`` is replaced). Invariants:

* Every request gets exactly one answer, by its deadline at the latest:
  :class:`~crosstalk.core.link.events.ReplyArrived` (the relay's reply, also an ``error`` it was
  refused with, which becomes our error with the same code, as
  :class:`~crosstalk.core.link.events.RequestFailed`), or ``RequestFailed(RelayUnreachable)``:
  not READY by the deadline, no reply by the deadline, the connection dropped while it was
  pending, or the link is going away (``abandon``).
* ``req`` numbers are never reused, so the late reply to an expired request matches nothing and
  is ignored.
* A held request waits across reconnects; a pending one does not survive its connection (the
  relay forgets it), so it fails at once rather than at its deadline.
* A leave goes after its room's queued posts: once READY it stays held while the outbox has a
  post for that room, for at most ``LEAVE_FLUSH`` (or half the time left to its deadline), then
  goes anyway: leaving never waits on a post the relay will not take. What was sent before the
  leave reaches the room, rather than being refused as from a non-member.
"""

from __future__ import annotations

import math
from collections.abc import Container, Hashable

import attrs

from crosstalk.core.link.common import (
    LEAVE_FLUSH,
    REQUEST_FRAMES,
    ReqNumbers,
    RequestFrame,
    relay_error,
)
from crosstalk.core.link.events import ReplyArrived, RequestFailed
from crosstalk.errors import LocalProtocolError, RelayUnreachable
from crosstalk.wire import relay as w


@attrs.frozen
class _Request:
    token: Hashable
    frame: RequestFrame
    deadline: float
    timeout: float
    flush_by: float | None = None  # a leave: until when it waits for its room's posts


@attrs.frozen
class Answered:
    """The reply to ``sent`` (the frame as it went out, with its ``req``), as an event."""

    sent: RequestFrame
    event: ReplyArrived | RequestFailed


class Requests:
    """Held and pending requests (see the module docstring).

    Args:
        url: the relay URL, for messages.
        reqs: the link's ``req`` counter (the boss owns it).
    """

    def __init__(self, *, url: str, reqs: ReqNumbers) -> None:
        self._url = url
        self._reqs = reqs
        self._held: list[_Request] = []
        self._pending: dict[int, _Request] = {}
        self._flush_at = math.inf  # READY: when a leave held for its room's posts goes anyway

    @property
    def open(self) -> int:
        """Requests not answered yet, held or pending."""
        return len(self._held) + len(self._pending)

    def add(self, frame: RequestFrame, token: Hashable, *, now: float, timeout: float) -> None:
        """Hold a request until ``send_held``; it is answered by ``now + timeout``.

        Raises:
            LocalProtocolError: ``frame`` is not a request (post, resume and ack have their own
                inputs).
        """
        if not isinstance(frame, REQUEST_FRAMES):
            raise LocalProtocolError(f"{type(frame).__name__} is not a request the link forwards")
        self._held.append(_Request(token, frame, now + timeout, timeout))

    def send_held(self, now: float, posting: Container[str] = ()) -> list[RequestFrame]:
        """The link is READY: the held requests to send, in order, with their fresh ``req``;
        a leave of a room in ``posting`` (the outbox holds a post for it) stays held until its
        ``flush_by``."""
        out = []
        held, self._held = self._held, []
        self._flush_at = math.inf
        for request in held:
            frame = request.frame
            if isinstance(frame, w.Leave) and frame.room in posting:
                if request.flush_by is None:  # the wait starts once the posts can go
                    wait = min(LEAVE_FLUSH, (request.deadline - now) / 2)
                    request = attrs.evolve(request, flush_by=now + wait)
                assert request.flush_by is not None
                if request.flush_by > now:
                    self._held.append(request)
                    self._flush_at = min(self._flush_at, request.flush_by)
                    continue
            req = self._reqs.take()
            self._pending[req] = request
            out.append(attrs.evolve(request.frame, req=req))
        return out

    def owns(self, req: int) -> bool:
        return req in self._pending

    def answered(self, req: int, frame: w.RelayFrame) -> Answered:
        """The relay's reply to pending request ``req`` (check ``owns`` first)."""
        request = self._pending.pop(req)
        sent = attrs.evolve(request.frame, req=req)
        if isinstance(frame, w.Error):
            return Answered(sent, RequestFailed(request.token, relay_error(frame)))
        return Answered(sent, ReplyArrived(request.token, frame))

    def lost(self, reason: str) -> list[RequestFailed]:
        """The connection dropped: every pending request fails; held ones keep waiting."""
        error = RelayUnreachable(
            f"The connection to the relay at {self._url} dropped before it answered "
            f"({reason}); try again."
        )
        failed = [RequestFailed(r.token, error) for r in self._pending.values()]
        self._pending.clear()
        self._flush_at = math.inf  # held leaves wait for READY again
        return failed

    def expire(self, now: float, last_error: str | None) -> list[RequestFailed]:
        """Fail every request whose deadline is ``now`` or past."""
        failed = []
        for request in [r for r in self._held if r.deadline <= now]:
            self._held.remove(request)
            reason = f" ({last_error})" if last_error else ""
            error = RelayUnreachable(
                f"Not connected to the relay at {self._url}{reason}; crosstalk keeps retrying."
            )
            failed.append(RequestFailed(request.token, error))
        for req, request in list(self._pending.items()):
            if request.deadline <= now:
                del self._pending[req]
                error = RelayUnreachable(
                    f"The relay at {self._url} did not answer within {request.timeout:g} s."
                )
                failed.append(RequestFailed(request.token, error))
        return failed

    def abandon(self, reason: str) -> list[RequestFailed]:
        """The link is going away: answer every open request now."""
        error = RelayUnreachable(f"The relay link stopped ({reason}); try again.")
        tokens = [r.token for r in self._held] + [r.token for r in self._pending.values()]
        self._held.clear()
        self._pending.clear()
        return [RequestFailed(token, error) for token in tokens]

    def next_deadline(self) -> float:
        """The earliest deadline of an open request, or the end of a leave's wait for its room's
        posts (inf with neither)."""
        times = [r.deadline for r in self._held] + [r.deadline for r in self._pending.values()]
        return min([*times, self._flush_at])
