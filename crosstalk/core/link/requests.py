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
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import attrs

from crosstalk.core.link.common import REQUEST_FRAMES, ReqNumbers, RequestFrame, relay_error
from crosstalk.core.link.events import ReplyArrived, RequestFailed
from crosstalk.errors import LocalProtocolError, RelayUnreachable
from crosstalk.wire import relay as w


@attrs.frozen
class _Request:
    token: Hashable
    frame: RequestFrame
    deadline: float
    timeout: float


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

    def send_held(self) -> list[RequestFrame]:
        """The link is READY: every held request, with its fresh ``req``, to send in order."""
        out = []
        held, self._held = self._held, []
        for request in held:
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
        """The earliest deadline of an open request (inf with none)."""
        times = [r.deadline for r in self._held] + [r.deadline for r in self._pending.values()]
        return min(times, default=math.inf)
