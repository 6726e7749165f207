"""A stand-in model server for testing real agent clients: loopback only, bounded lifetime.

It speaks just enough of four model APIs for Claude Code, Codex, Qwen Code and Gemini CLI to run
a session against it (platform-notes §5), plays a script of replies and tool calls
(``script.py``), and appends every request it receives to a JSONL log so a test can check what
reached the model: a hook's context, a tool result.

Endpoints (any path prefix; the query string is ignored except Gemini's ``alt=sse``):

=========================================  ====================================================
``POST …/v1/messages``                     Anthropic Messages, SSE when ``"stream": true``
``POST …/v1/messages/count_tokens``        ``{"input_tokens": N}``
``POST …/v1/responses``                    OpenAI Responses, SSE when ``"stream": true``
``POST …/v1/chat/completions``             OpenAI Chat Completions, SSE chunks + ``[DONE]``
``POST …/models/<m>:generateContent``      Gemini, one JSON response
``POST …/models/<m>:streamGenerateContent``  Gemini, SSE with ``alt=sse``, else a JSON array
``GET``/``HEAD`` anything, other ``POST``  404 with a JSON error (Claude Code probes ``HEAD /``)
=========================================  ====================================================

Run it as a process (``python -m tests.clients.standin --port 0 --log FILE [--script FILE]
[--lifetime SECONDS]``; the first stdout line is ``{"listening": "http://127.0.0.1:PORT"}``, and
when the lifetime ends it prints ``{"stopped": "lifetime"}`` and exits 0), or in-process with
``with Standin(script, log_path) as standin: ... standin.url``.

Standard library HTTP: a ``ThreadingHTTPServer`` serving from one background thread, a thread per
connection. The script's use counts and the log are guarded by one lock each.
"""

from __future__ import annotations

import argparse
import json
import re
import socketserver
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import attrs

from tests.clients import replies
from tests.clients.replies import Payload
from tests.clients.script import Api, Script
from tests.clients.turns import is_streaming, model_of, read_turn

HOST = "127.0.0.1"
DEFAULT_LIFETIME = 600.0
MAX_BODY = 32 * 1024 * 1024
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key",
                            "x-goog-api-key", "api-key", "cookie"})
_GEMINI = re.compile(
    r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")


@attrs.frozen
class Endpoint:
    """Which API a request path names; ``mode`` picks the response form for Gemini."""

    api: Api
    kind: str
    model: str | None = None
    mode: str = "json"


def route(path: str, query: str) -> Endpoint | None:
    """Map a request path (without query) to the endpoint serving it, or None for a 404."""
    path = path.rstrip("/")
    if path.endswith("/messages/count_tokens"):
        return Endpoint(Api.ANTHROPIC, "count_tokens")
    if path.endswith("/messages"):
        return Endpoint(Api.ANTHROPIC, "messages")
    if path.endswith("/responses"):
        return Endpoint(Api.RESPONSES, "responses")
    if path.endswith("/chat/completions"):
        return Endpoint(Api.CHAT, "chat")
    found = _GEMINI.search(path)
    if found is None:
        return None
    if found["method"] == "generateContent":
        return Endpoint(Api.GEMINI, "gemini", found["model"], "json")
    sse = ("alt", "sse") in parse_qsl(query)
    return Endpoint(Api.GEMINI, "gemini", found["model"], "sse" if sse else "array")


class RequestLog:
    """Append-only JSONL log of requests; one whole line per write."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, object]) -> None:
        """Append one record as a line (flushed before returning)."""
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line)


class Player:
    """Plays the script: chooses answers and counts each step's uses, under one lock."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._used: dict[int, int] = {}
        self._serial = 0

    def answer(self, endpoint: Endpoint, body: object, size: int) -> tuple[Payload, int | None]:
        """The response to one decoded request, and the index of the step that gave it."""
        if endpoint.kind == "count_tokens":
            return replies.count_tokens(size), None
        turn = read_turn(endpoint.api, body)
        with self._lock:
            self._serial += 1
            serial = self._serial
            chosen = self.script.choose(endpoint.api, turn, self._used)
            if chosen.step is not None:
                self._used[chosen.step] = self._used.get(chosen.step, 0) + 1
        model = endpoint.model or model_of(body)
        stream = is_streaming(body)
        if endpoint.api is Api.ANTHROPIC:
            return replies.anthropic(chosen, model, stream, serial), chosen.step
        if endpoint.api is Api.RESPONSES:
            return replies.responses(chosen, model, stream, serial), chosen.step
        if endpoint.api is Api.CHAT:
            return replies.chat(chosen, model, stream, serial), chosen.step
        return replies.gemini(chosen, model, endpoint.mode, serial), chosen.step


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, player: Player, log: RequestLog) -> None:
        self.player = player
        self.log = log
        super().__init__((HOST, port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind would look up our host name (socket.getfqdn), which can stall
        # for seconds without DNS; the name is only used in error pages.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]


class _BadBody(Exception):
    """The request body could not be read or decoded; the message says why."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 30.0  # a stalled client frees its thread after this long
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the JSONL log is the record."""

    def do_HEAD(self) -> None:
        self._record(None, None, None)
        self._send(404, replies.not_found(f"no such endpoint: HEAD {self._safe_path()}"),
                   head=True)

    def do_GET(self) -> None:
        self._record(None, None, None)
        self._send(404, replies.not_found(f"no such endpoint: GET {self._safe_path()}"))

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        endpoint = route(url.path, url.query)
        try:
            raw = self._read_body()
            body = json.loads(raw) if raw else None
        except (_BadBody, ValueError) as exc:
            self.close_connection = True
            self._record(endpoint, None, None, error=str(exc))
            self._send(400, replies.as_json({"type": "error", "error": {
                "type": "invalid_request_error", "message": f"stand-in: {exc}"}}))
            return
        if endpoint is None:
            self._record(None, body, None)
            self._send(404, replies.not_found(f"no such endpoint: POST {url.path}"))
            return
        payload, step = self.server.player.answer(endpoint, body, len(raw))
        self._record(endpoint, body, step)
        self._send(200, payload)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = self._read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= MAX_BODY:
                raise _BadBody(f"Content-Length {length} out of range")
            raw = self.rfile.read(length)
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        if encoding in ("gzip", "deflate"):
            try:
                return zlib.decompress(raw, wbits=47)  # 32 + 15: gzip or zlib header
            except zlib.error as exc:
                raise _BadBody(f"bad {encoding} body: {exc}") from None
        if encoding != "identity":
            raise _BadBody(f"unsupported Content-Encoding {encoding!r}")
        return raw

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:  # each pass consumes one chunk; MAX_BODY bounds the total
            size_line = self.rfile.readline(1024)
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                break
            total += size
            if total > MAX_BODY:
                raise _BadBody("chunked body too large")
            parts.append(self.rfile.read(size))
            self.rfile.readline(3)
        for _ in range(64):  # trailers end with an empty line (or the peer closing)
            if self.rfile.readline(8192) in (b"\r\n", b"\n", b""):
                break
        return b"".join(parts)

    def _send(self, status: int, payload: Payload, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", payload.content_type)
        self.send_header("Content-Length", str(len(payload.body)))
        if payload.content_type == replies.SSE:
            self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not head:
            self.wfile.write(payload.body)

    def _safe_path(self) -> str:
        """The request path with any ``key=`` query parameter (Gemini's API key) removed."""
        url = urlsplit(self.path)
        query = urlencode([(k, v) for k, v in parse_qsl(url.query) if k != "key"])
        return url.path + (f"?{query}" if query else "")

    def _record(self, endpoint: Endpoint | None, body: object, step: int | None,
                error: str | None = None) -> None:
        record: dict[str, object] = {
            "t": time.time(), "api": endpoint.api.value if endpoint else None,
            "method": self.command, "path": self._safe_path(),
            "headers": {k: v for k, v in self.headers.items()
                        if k.lower() not in SECRET_HEADERS},
            "body": body, "step": step}
        if error is not None:
            record["error"] = error
        self.server.log.write(record)


class Standin:
    """One stand-in server on 127.0.0.1, serving from a background thread while open."""

    def __init__(self, script: Script, log_path: Path, port: int = 0) -> None:
        self.log = RequestLog(log_path)
        self._server = _Server(port, Player(script), self.log)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT``."""
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> Standin:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="standin", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and close the listening socket; waits (bounded) for the serve thread."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()


def main(argv: list[str] | None = None) -> int:
    """Serve until the lifetime ends. Exit 0 then; 2 for bad arguments or a bad script."""
    parser = argparse.ArgumentParser(prog="python -m tests.clients.standin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--log", type=Path, required=True, help="JSONL file of requests")
    parser.add_argument("--script", type=Path, help="JSON script of replies (default: none)")
    parser.add_argument("--lifetime", type=float, default=DEFAULT_LIFETIME,
                        help="seconds to serve before exiting by itself (default 600)")
    args = parser.parse_args(argv)
    if not 0 < args.lifetime <= 24 * 3600:
        parser.error("--lifetime must be between 0 and 86400 seconds")
    try:
        script = Script.load(args.script) if args.script else Script()
    except (OSError, ValueError) as exc:
        print(f"standin: bad script {args.script}: {exc}", file=sys.stderr)
        return 2
    with Standin(script, args.log, args.port) as standin:
        print(json.dumps({"listening": standin.url}), flush=True)
        threading.Event().wait(args.lifetime)  # the bound: nothing sets it; SIGTERM ends us
    print(json.dumps({"stopped": "lifetime"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
