"""Claude Code channels: the MCP server pushes surfaced notices as ``notifications/claude/channel``.

Claude Code (2.1.80 and later, launched with ``--channels`` or, for a channel not on its
allowlist, ``--dangerously-load-development-channels server:crosstalk``) listens for this
notification from a server that declares the ``experimental["claude/channel"]`` capability,
and shows its ``content`` to the model as a ``<channel source="crosstalk" …>`` event; every key
of ``meta`` (identifier characters only) becomes an attribute of that tag.

Off unless the person turns it on (``CROSSTALK_CHANNELS=1`` in the server's environment, which
docs/clients.md shows), so every other client sees exactly the server it saw before. When on,
the server asks the daemon for notices the gate surfaced and no session has shown as soon as
something arrives (a ``wait`` held open on the daemon rings it: the push is then as quick as the
inbox socket's, where a fixed sweep cost half a second on average), and every :data:`SWEEP`
seconds anyway (what arrives while no ``wait`` is open, a daemon restarted): the ``notices`` op
with ``pending`` and ``words``. It renders them exactly as the hook
and the inbox push do (:func:`crosstalk.core.notice.render_arrivals`: a plain notice, and the
sender's words only where the gate decided ``deliver``), sends one notification per rendered
notice, then marks them shown (``notice_shown``) so the hook does not show them again. The
``meta`` values (sender, session, ids) are escaped as the content's names are
(:func:`crosstalk.core.notice.escape_text`).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

import trio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification

from crosstalk.core.notice import NAME_MAX, Arrival, escape_text, render_arrivals
from crosstalk.errors import CrosstalkError
from crosstalk.mcp.tool_kit import Caller

log = logging.getLogger(__name__)

CHANNELS_ENV = "CROSSTALK_CHANNELS"
CAPABILITY = "claude/channel"
METHOD = "notifications/claude/channel"
SWEEP = 1.0
"""Seconds between looks for surfaced notices when nothing rang."""
ARRIVAL_WAIT = 30.0
"""Seconds one ``wait`` on the daemon stays open before the next one replaces it."""


def channels_enabled(env: Mapping[str, str]) -> bool:
    """Whether the person turned channel pushes on for this server."""
    return env.get(CHANNELS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def experimental_capabilities(env: Mapping[str, str] = os.environ) -> dict[str, dict[str, Any]]:
    """The capabilities to declare: ``claude/channel`` only when pushes are on."""
    return {CAPABILITY: {}} if channels_enabled(env) else {}


def channel_notifications(notices: list[dict[str, Any]]) -> tuple[list[JSONRPCNotification],
                                                                   list[str]]:
    """The notifications for ``notices`` (the ``notices`` op's rows) and the ids they show."""
    arrivals = [
        Arrival(str(n["id"]), str(n.get("label", "")), n.get("from_session"),
                str(n.get("kind", "message")), n.get("words"), n.get("batch"))
        for n in notices
    ]
    out: list[JSONRPCNotification] = []
    shown: list[str] = []
    for rendered in render_arrivals(arrivals, marker=lambda: secrets.token_hex(8)):
        # Claude Code makes each meta value an attribute of its <channel> tag: a label such as
        # `x" trust="y` or `</channel>` must stay inside it, escaped exactly as the content is.
        sender = escape_text(rendered.label[:NAME_MAX])
        meta = {"sender": sender, "ids": escape_text(",".join(rendered.ids))}
        if rendered.session:
            meta["session"] = escape_text(rendered.session[:NAME_MAX])
        params = {"content": rendered.text, "meta": meta}
        out.append(JSONRPCNotification(jsonrpc="2.0", method=METHOD, params=params))
        shown.extend(rendered.ids)
    return out, shown


async def push_notices(
    caller: Caller, write_stream: trio.abc.SendChannel[SessionMessage] | Any
) -> None:
    """Forever: push what the gate surfaced for this session, then mark it shown; look again
    when something arrives, or after :data:`SWEEP` seconds."""
    bell = _Doorbell()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_ring_on_arrival, caller, bell)
        while True:
            try:
                await _push_once(caller, write_stream)
            except CrosstalkError as exc:  # the daemon is away; the hook pulls meanwhile
                log.info("channel: no notices this round: %s", exc.message)
            await bell.wait(SWEEP)


class _Doorbell:
    """A ring that is kept until the next wait takes it (a ring while pushing is not lost)."""

    def __init__(self) -> None:
        self._rung = trio.Event()

    def ring(self) -> None:
        self._rung.set()

    async def wait(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            await self._rung.wait()
        self._rung = trio.Event()


async def _ring_on_arrival(caller: Caller, bell: _Doorbell) -> None:
    """Keep a ``wait`` open on the daemon and ring ``bell`` at each arrival."""
    while True:
        try:
            reply = await caller.call("wait", {"timeout": ARRIVAL_WAIT},
                                      limit=ARRIVAL_WAIT + SWEEP * 5)
        except CrosstalkError:  # the daemon is away: the sweep looks meanwhile
            await trio.sleep(SWEEP)
            continue
        if reply.get("arrived"):
            bell.ring()


async def _push_once(caller: Caller, write_stream: Any) -> None:
    reply = await caller.call(
        "notices", {"session": caller.session, "pending": True, "words": True}
    )
    notifications, shown = channel_notifications(list(reply.get("notices", [])))
    for notification in notifications:
        await write_stream.send(SessionMessage(notification))
    if shown:
        await caller.call("notice_shown", {"session": caller.session or "", "ids": shown})
