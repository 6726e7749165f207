"""A typed handle on the relay-link actor's inbox: request/reply frames and committed posts.

Each call carries its own one-shot reply channel (DESIGN §3), so callers never share state with
the link; the link answers every request by its deadline, and we bound our own wait as well.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import trio

from crosstalk.actors.relay_link import (
    LinkCommand,
    LinkTimings,
    Request,
    RetryNow,
)
from crosstalk.actors.relay_link_api import Committed
from crosstalk.core.link import OutboxItem, RequestFrame
from crosstalk.crypto import MAX_WORK_BITS, do_work
from crosstalk.errors import CrosstalkError, RelayUnreachable, RemoteProtocolError
from crosstalk.wire import relay as w

F = TypeVar("F", bound=w.RelayFrame)
log = logging.getLogger(__name__)

# Our own bound on top of the link's: the link answers every request by its deadline.
_GRACE = 5.0
# Tries at a paid slot frame: the seed is the connection's, so a reconnect between the ask and
# the frame costs one more round (a refusal ``work_required``).
WORK_TRIES = 3


class RelayClient:
    """Send requests and posts through the relay link."""

    def __init__(self, inbox: trio.MemorySendChannel[LinkCommand], timings: LinkTimings) -> None:
        self._inbox = inbox
        self._timings = timings

    async def request(
        self, frame: RequestFrame, expect: type[F], *, within: float | None = None
    ) -> F:
        """Send ``frame`` and return the relay's reply (an ``expect``) within ``within`` seconds.

        Raises the relay's refusal as its CrosstalkError, or RelayUnreachable.
        """
        wait = self._timings.request_timeout if within is None else within
        send, receive = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
        async with receive:
            await self._inbox.send(Request(frame, send, wait))
            with trio.move_on_after(wait + _GRACE):
                answer = await receive.receive()
                if isinstance(answer, CrosstalkError):
                    raise answer
                if not isinstance(answer, expect):
                    raise RemoteProtocolError(
                        f"the relay answered {w.tag_of(frame)} with {w.tag_of(answer)}"
                    )
                return answer
        raise RelayUnreachable("The relay did not answer in time.")

    async def request_paid(
        self, make: Callable[[bytes], w.SlotOpen | w.SlotJoin], expect: type[F], *,
        slot: str = "",
    ) -> F:
        """Send ``make(proof)``, a slot open or join, with the proof of work the relay asks of
        an identity it does not know yet (``slot``: the slot being joined).

        A relay from before proof of work does not know ``work_ask`` (``bad_frame``): then the
        frame goes without one. The work runs on a thread, so the actors keep beating.

        Raises:
            CrosstalkError: the relay's refusal of the frame, as :meth:`request`.
            RemoteProtocolError: the relay asked for more than ``MAX_WORK_BITS``.
        """
        for attempt in range(1, WORK_TRIES + 1):
            try:
                ask = await self.request(w.WorkAsk(0, slot), w.Work)
            except CrosstalkError as exc:
                if exc.code != "bad_frame":
                    raise
                return await self.request(make(b""), expect)
            if ask.bits > MAX_WORK_BITS:
                raise RemoteProtocolError(
                    f"the relay asks for {ask.bits} bits of work before a pairing slot; "
                    f"crosstalk does at most {MAX_WORK_BITS}"
                )
            proof = b""
            if ask.bits > 0:
                proof = await trio.to_thread.run_sync(
                    do_work, ask.seed, ask.bits, abandon_on_cancel=True
                )
            try:
                return await self.request(make(proof), expect)
            except CrosstalkError as exc:
                if exc.code != "work_required" or attempt == WORK_TRIES:
                    raise
        raise AssertionError("unreachable: the last try returns or raises")

    def retry_now(self) -> None:
        """Tell the link to stop backing off and connect (the relay is back). Best effort: a
        full inbox means the link is busy anyway."""
        try:
            self._inbox.send_nowait(RetryNow())
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def committed(self, items: Sequence[OutboxItem], at: float) -> None:
        """Hand the link posts committed to the outbox at ``at`` (trio's clock); it posts each
        when its turn comes.

        The rows are durable already and their senders have heard ``queued``, so this must not
        be lost to a cancelled caller (a room stopping): it is shielded, and waits while the
        link's inbox is full at most ``send_timeout``. A hand-over that cannot be made (the link
        stopped, or stuck that long) leaves the rows to the outbox, which the link's next
        instance loads.
        """
        command = Committed(tuple(items), at)
        try:
            self._inbox.send_nowait(command)
        except trio.WouldBlock:
            pass  # full: wait below
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            log.info("relay link stopped; %d committed post(s) wait in the outbox", len(items))
            return
        else:
            # Yield as a channel send does, but never cancelled: the rows are handed over. (No
            # shield scope to enter and leave on this, the usual, path.)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        with trio.CancelScope(shield=True), trio.move_on_after(self._timings.send_timeout):
            try:
                await self._inbox.send(command)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.info("relay link stopped; %d committed post(s) wait in the outbox",
                         len(items))
                return
        log.warning("relay link took no posts for %g s; %d committed post(s) wait in the outbox "
                    "for its next start", self._timings.send_timeout, len(items))
