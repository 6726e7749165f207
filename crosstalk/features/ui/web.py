"""The page's ASGI app (Starlette, served by hypercorn's Trio worker; see actor.py).

Safety, in the order a request meets it (:class:`Guard`):

- only loopback peers, and only a ``Host`` of ``127.0.0.1:PORT`` or ``localhost:PORT`` (a page
  on another origin cannot reach us through DNS rebinding);
- a token we minted on every request: in the ``X-Crosstalk-Token`` header, or, for a ``GET``
  only (the page itself, its script and style, the event stream, which a browser fetches
  without custom headers), in the ``t`` query parameter. A state-changing request must carry
  it in the header, which no other origin's page can set, so there is no cross-site request
  forgery; its body must be JSON, which no plain HTML form can send;
- every response carries a strict Content-Security-Policy (scripts and styles from this origin
  only, no inline code, no frames), ``no-store`` and ``no-referrer`` (the URL holds the token).

The page renders every string as text (``textContent``), never as HTML (static/app.js).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from crosstalk.errors import CrosstalkError
from crosstalk.features.ui.hub import UiHub
from crosstalk.features.ui.state import snapshot

log = logging.getLogger(__name__)

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
Scope = MutableMapping[str, Any]

TOKEN_HEADER = "x-crosstalk-token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
#: What the person can do from the page: existing ops, called exactly as the CLI calls them.
ACTIONS = frozenset({
    "send", "answer", "room_accept", "room_decline", "trust", "mute", "task_claim",
    "task_release", "release",
})
#: Parameters naming places on this machine. The page has no working directory or transcript of
#: its own, so an action never carries them: a page's ``send`` takes file and diff slices only
#: as the op allows a request with no ``cwd`` (from the one project a session works in), and a
#: ``turns`` slice only from a transcript a session registered.
PLACES = frozenset({"cwd", "transcript"})
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_-]+")
#: Seconds between looks at the state when nothing nudges a live stream.
STREAM_TICK = 1.0
#: A slice index longer than this is no index of a message that fits in a room op.
MAX_INDEX_DIGITS = 6


def _static(name: str) -> bytes:
    return (resources.files("crosstalk.features.ui") / "static" / name).read_bytes()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Guard:
    """ASGI middleware: loopback, Host, token (see the module docstring), security headers."""

    def __init__(self, app: Any, hub: UiHub) -> None:
        self._app = app
        self._hub = hub

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        client = scope.get("client")
        if not _loopback(client[0] if client else None):
            return 403, "loopback only"
        allowed = {f"127.0.0.1:{self._hub.port}", f"localhost:{self._hub.port}"}
        if _header(scope, b"host") not in allowed:
            return 403, "wrong host"
        token = _header(scope, TOKEN_HEADER.encode())
        if token is None and scope.get("method") in ("GET", "HEAD"):
            query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
            token = query["t"][0] if query.get("t") else None
        if not self._hub.valid(token):
            return 401, "a valid token is required"
        return None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # no WebSockets: the page is live through server-sent events
        refusal = self._refusal(scope)

        async def send_secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        if refusal is not None:
            status, why = refusal
            await Response(why, status_code=status)(scope, receive, send_secured)
            return
        await self._app(scope, receive, send_secured)


def _error(exc: CrosstalkError, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, status_code=status)


async def page(hub: UiHub, request: Request) -> Response:
    """The page, carrying its token only when it is one we minted (and plainly a token)."""
    token = request.query_params.get("t") or ""
    token = token if hub.valid(token) and _TOKEN_CHARS.fullmatch(token) else ""
    html = _static("index.html").decode().replace("{{TOKEN}}", token)
    return Response(html, media_type="text/html; charset=utf-8")


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return Response("not found", status_code=404)
    return Response(_static(name), media_type=STATIC[name])


async def state(call: Call, request: Request) -> Response:
    return JSONResponse(await snapshot(call))


async def _answer(call: Call, name: str, params: dict[str, Any]) -> Response:
    """One op's reply, or its error as the page shows errors."""
    try:
        return JSONResponse(await call(name, params))
    except CrosstalkError as exc:
        return _error(exc)


def _bad_query(message: str) -> JSONResponse:
    """A query the page itself never sends: one sentence, ``invalid_request``, 400 (not a bug)."""
    return JSONResponse({"error": {"code": "invalid_request", "message": message}}, 400)


async def room(call: Call, request: Request) -> Response:
    room_id = request.query_params.get("id", "")
    if not room_id:
        return _bad_query("Name the room: /api/room?id=ROOM.")
    return await _answer(call, "ui_room", {"room": room_id})


async def search(call: Call, request: Request) -> Response:
    """The search box: a read, so a GET, like a room's conversation (not an action)."""
    query = request.query_params.get("q", "")
    if not query.strip():
        return _bad_query("Say what to search for: /api/search?q=WORDS.")
    return await _answer(call, "search", {"query": query})


async def slice_(call: Call, request: Request) -> Response:
    index = request.query_params.get("index", "0") or "0"
    if not (index.isascii() and index.isdigit()) or len(index) > MAX_INDEX_DIGITS:
        return _bad_query("A slice index is a whole number from 0: /api/slice?id=ID&index=N.")
    return await _answer(call, "read_slice", {"id": request.query_params.get("id", ""),
                                              "index": int(index)})


async def _action_params(request: Request) -> dict[str, Any] | Response:
    """An action's parameters: a JSON object, or the refusal to send back."""
    if request.headers.get("content-type", "").split(";")[0] != "application/json":
        return JSONResponse({"error": {"code": "invalid_request", "message": "JSON only"}}, 415)
    try:
        params = json.loads(await request.body())
        if not isinstance(params, dict):
            raise ValueError
    except ValueError:
        return JSONResponse({"error": {"code": "invalid_request", "message": "bad JSON"}}, 400)
    return params


async def act(hub: UiHub, call: Call, request: Request) -> Response:
    """Run one of :data:`ACTIONS` as the CLI would, then tell live pages to look again."""
    name = request.path_params["name"]
    if name not in ACTIONS:
        return JSONResponse({"error": {"code": "unknown_op", "message": name}}, 404)
    params = await _action_params(request)
    if isinstance(params, Response):
        return params
    try:
        result = await call(name, {k: v for k, v in params.items() if k not in PLACES})
    except CrosstalkError as exc:
        return _error(exc)
    hub.changed()
    return JSONResponse(result)


async def events(hub: UiHub, call: Call, request: Request) -> Response:
    return StreamingResponse(_stream(hub, call), media_type="text/event-stream")


def build_app(hub: UiHub, call: Call) -> Guard:
    """The page's app: ``call(op, params)`` runs one daemon op in-process."""
    routes = [
        Route("/", functools.partial(page, hub)),
        Route("/static/{name}", static),
        Route("/api/state", functools.partial(state, call)),
        Route("/api/room", functools.partial(room, call)),
        Route("/api/slice", functools.partial(slice_, call)),
        Route("/api/search", functools.partial(search, call)),
        Route("/api/events", functools.partial(events, hub, call)),
        Route("/api/act/{name}", functools.partial(act, hub, call), methods=["POST"]),
    ]
    return Guard(Starlette(routes=routes), hub)


async def _stream(hub: UiHub, call: Call) -> AsyncIterator[str]:
    """Server-sent events: the whole state whenever it differs from the last one sent."""
    last = ""
    while True:
        seen = hub.version
        current = json.dumps(await snapshot(call), sort_keys=True)
        if current != last:
            last = current
            yield f"event: state\ndata: {current}\n\n"
        else:
            yield ": idle\n\n"  # a comment line: notices a closed tab
        with trio.move_on_after(STREAM_TICK):
            await hub.wait_changed(seen)
