"""The page's web server: hypercorn's Trio worker serving the ASGI app, as a supervised actor.

It listens on 127.0.0.1 only. The first start picks a free port; a restart binds the same one
again, so a URL already open in a browser keeps working. Hypercorn's access log is off: request
lines carry the page's token, and the token is never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from crosstalk.actors.context import ActorContext

log = logging.getLogger(__name__)

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


class UiServer:
    """Serves ``app`` on loopback; ``on_bound(port)`` is told the port once it listens."""

    def __init__(self, app: ASGIApp, *, port: int, on_bound: Callable[[int], None]) -> None:
        self._app = app
        self._port = port
        self._on_bound = on_bound

    def _config(self) -> Config:
        config = Config()
        config.bind = [f"127.0.0.1:{self._port}"]
        config.accesslog = None  # request lines hold the token
        config.errorlog = logging.getLogger("crosstalk.ui.http")
        config.graceful_timeout = 1.0
        config.keep_alive_timeout = 30.0
        return config

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(serve, self._app, self._config())
            self._port = int(binds[0].rsplit(":", 1)[1])
            self._on_bound(self._port)
            log.info("ui listening on 127.0.0.1:%d", self._port)
            task_status.started()
            while True:  # serve_listeners proves nothing while idle; beat to show the loop lives
                ctx.beat()
                await trio.sleep(ctx.heartbeat / 3)
