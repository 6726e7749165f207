"""Keeps the machine's embedded relay alive for a daemon that uses it.

With no relay configured, daemons share one relay on loopback that the first of them started
(``crosstalk.hosting.local_relay``). If that relay dies, every daemon would otherwise retry for ever
against a closed port. This actor watches its daemon's link: while the link is to the local
default relay and is down after a loss, it probes the relay's health and starts it again.
``ensure_local_relay`` takes a file lock, so of all the daemons noticing at once exactly one
starts it; the others find it answering. Once it answers the keeper tells the link to connect
at once instead of waiting out its backoff, and a relay this daemon started and that died is
reaped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_link import LinkStatus
from crosstalk.errors import CrosstalkError
from crosstalk.hosting.local_relay import ensure_local_relay, is_local_default, reap

log = logging.getLogger(__name__)


class LocalRelayKeeper:
    """Actor: restart the embedded relay when the link to it is lost."""

    def __init__(
        self,
        status: Callable[[], LinkStatus | None],
        ensure: Callable[[], int | None] = ensure_local_relay,
        *,
        retry_now: Callable[[], None] = lambda: None,
        started: Iterable[int] = (),
    ) -> None:
        self._status = status
        self._ensure = ensure
        self._retry_now = retry_now
        # Relays this daemon started (our children): collected once they exit.
        self._children = set(started)

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._beat, ctx)  # a start takes seconds: keep beating meanwhile
            task_status.started()
            while True:
                await trio.sleep(ctx.heartbeat / 3)
                self._children = {pid for pid in self._children if not reap(pid)}
                if self._wanted():
                    await self._restart()

    def _wanted(self) -> bool:
        link = self._status()
        return (
            link is not None
            and is_local_default(link.url)
            and not link.connected
            and link.losses > 0
        )

    async def _restart(self) -> None:
        try:
            pid = await trio.to_thread.run_sync(self._ensure, abandon_on_cancel=True)
        except CrosstalkError as exc:
            log.warning("local relay: could not start it again: %s", exc.message)
            return
        if pid is not None:
            self._children.add(pid)
        # It answers: connect now rather than when the link's backoff runs out (up to 30 s).
        self._retry_now()

    async def _beat(self, ctx: ActorContext[None]) -> None:
        while True:
            ctx.beat()
            await trio.sleep(ctx.heartbeat / 3)
