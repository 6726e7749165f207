"""The NATS client protocol as bytes in, events out, and commands as bytes (sans-IO).

Theory of operation
-------------------
The protocol (docs.nats.io, "Client Protocol") is text-framed. Every frame is a control line
ended by CRLF; the operation names are case-insensitive and arguments are separated by spaces
or tabs. Two frames from the server carry a body after the line: ``MSG <subject> <sid>
[reply-to] <#bytes>`` and ``HMSG <subject> <sid> [reply-to] <#header bytes> <#total bytes>``,
each followed by that many bytes and a CRLF. The rest are one line: ``INFO {json}``, ``PING``,
``PONG``, ``+OK`` and ``-ERR '<message>'``.

:class:`NatsParser` has two states: waiting for a control line, or (after a ``MSG``/``HMSG``
line) waiting for the body it announced. :meth:`NatsParser.receive_data` takes bytes as they
come, split anywhere, and queues an event per complete frame; :meth:`NatsParser.events_received`
drains them. Anything that is not the protocol (an unknown operation, a bad count, a body not
ended by CRLF, a line or body past the limits) raises :class:`NatsProtocolError` and parks the
parser in ``ERROR``: the connection is useless after it, as the server itself would decide.

A header block (``HMSG``/``HPUB``) reads like HTTP: ``NATS/1.0`` with an optional status code
and description (``NATS/1.0 503`` is the server's "no responders"), then ``Key: Value`` lines and
an empty line. Events keep the block as bytes: a relay node skips most messages it receives (its
own writes, echoed by the stream's RePublish) on one header, so :func:`header_value` finds one
value without parsing the rest and :func:`parse_headers` parses all of it when needed.

Commands (:func:`connect`, :func:`pub`, :func:`sub`, :func:`unsub`, ``PING``, ``PONG``) are
encoded by pure functions; a subject or header that would break the framing raises
:class:`~crosstalk.errors.LocalProtocolError`.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs

from crosstalk.errors import LocalProtocolError, RemoteProtocolError

MAX_CONTROL_LINE = 64 * 1024  # bytes; an INFO from a large cluster lists every server's URL
DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024  # bytes: the server's hard upper bound on max_payload
CRLF = b"\r\n"
PING = b"PING\r\n"
PONG = b"PONG\r\n"
HEADER_VERSION = "NATS/1.0"


class NatsProtocolError(RemoteProtocolError):
    """The NATS server sent something that is not the NATS client protocol; the connection is
    dropped and opened again."""

    code = "nats_protocol_error"


@attrs.frozen
class Info:
    """What the server says about itself, at connect and when its cluster changes."""

    server_id: str
    version: str
    max_payload: int
    headers: bool
    connect_urls: tuple[str, ...] = ()


@attrs.frozen
class Msg:
    """A message for one of this client's subscriptions (``sid``)."""

    subject: str
    sid: str
    reply: str | None
    payload: bytes
    headers: bytes | None = None  # the raw header block (HMSG), parsed on demand


@attrs.frozen
class Ping:
    pass


@attrs.frozen
class Pong:
    pass


@attrs.frozen
class Ok:
    pass


@attrs.frozen
class Err:
    """``-ERR``: the server refused something; most such errors close the connection."""

    message: str


Event = Info | Msg | Ping | Pong | Ok | Err


@attrs.frozen
class Headers:
    """A parsed header block: the status line's code (``None`` for a plain message) and the
    first value of each key (keys are case-sensitive in NATS)."""

    status: int | None
    description: str
    fields: dict[str, str]


class ParserState(enum.Enum):
    LINE = "line"  # waiting for a control line
    BODY = "body"  # waiting for the body a MSG or HMSG line announced
    ERROR = "error"  # the stream broke the protocol; nothing more is parsed


@attrs.define
class _Pending:
    subject: str
    sid: str
    reply: str | None
    header_size: int  # -1 for MSG
    total: int


class NatsParser:
    """Server bytes in, :data:`Event` objects out."""

    def __init__(self, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        self.max_payload = max_payload
        self.state = ParserState.LINE
        self._buffer = bytearray()
        self._pending: _Pending | None = None
        self._events: list[Event] = []

    def receive_data(self, data: bytes | bytearray) -> None:
        """Take in bytes from the server; raises :class:`NatsProtocolError` if they break the
        protocol (the events of the frames before the fault are still queued)."""
        if self.state is ParserState.ERROR:
            raise NatsProtocolError("the NATS connection broke the protocol before")
        self._buffer += data
        try:
            self._parse()
        except NatsProtocolError:
            self.state = ParserState.ERROR
            raise

    def events_received(self) -> list[Event]:
        """The events of every complete frame since the last call, in order."""
        events, self._events = self._events, []
        return events

    def _parse(self) -> None:
        buf = self._buffer
        pos = 0
        try:
            while True:
                pending = self._pending
                if pending is not None:
                    end = pos + pending.total
                    if len(buf) < end + 2:
                        break
                    if buf[end:end + 2] != CRLF:
                        raise NatsProtocolError("a NATS message body is not followed by CRLF")
                    self._events.append(_message(pending, buf, pos, end))
                    pos = end + 2
                    self._pending = None
                    self.state = ParserState.LINE
                    continue
                end = buf.find(CRLF, pos)
                if end < 0:
                    # One byte more than the limit may be the CR of a line that fits.
                    if len(buf) - pos > MAX_CONTROL_LINE + 1:
                        raise NatsProtocolError("a NATS control line is too long")
                    break
                if end - pos > MAX_CONTROL_LINE:
                    raise NatsProtocolError("a NATS control line is too long")
                line = bytes(buf[pos:end])
                pos = end + 2
                self._line(line)
        finally:
            del buf[:pos]

    def _line(self, line: bytes) -> None:
        op, _, rest = line.partition(b" ")
        if op != b"HMSG" and op != b"MSG":  # nearly every line is one of these, upper case
            op = op.upper()
        try:
            if op == b"MSG" or op == b"HMSG":
                self._pending = self._announced(op == b"HMSG", rest.split())
                self.state = ParserState.BODY
            elif op == b"PING" and not rest.strip():
                self._events.append(Ping())
            elif op == b"PONG" and not rest.strip():
                self._events.append(Pong())
            elif op == b"+OK" and not rest.strip():
                self._events.append(Ok())
            elif op == b"-ERR":
                self._events.append(Err(rest.strip().strip(b"'").decode()))
            elif op == b"INFO":
                self._events.append(_info(rest))
            else:
                raise NatsProtocolError(f"unknown NATS operation {op[:32]!r}")
        except (ValueError, RecursionError):  # bad UTF-8 or JSON (a RecursionError if deep)
            raise NatsProtocolError(f"a NATS {op[:8]!r} line does not parse") from None

    def _announced(self, with_headers: bool, args: list[bytes]) -> _Pending:
        counts = 2 if with_headers else 1
        if (len(args) not in (2 + counts, 3 + counts) or not args[-1].isdigit()
                or not args[-counts].isdigit()):
            raise NatsProtocolError("a NATS MSG line has the wrong arguments")
        total = int(args[-1])
        header_size = int(args[-2]) if with_headers else -1
        if total > self.max_payload or header_size > total:
            raise NatsProtocolError("a NATS message is larger than announced or allowed")
        reply = args[2].decode() if len(args) == 3 + counts else None
        return _Pending(args[0].decode(), args[1].decode(), reply, header_size, total)


def _message(p: _Pending, buf: bytearray, start: int, end: int) -> Msg:
    """The message whose header block and payload are ``buf[start:end]`` (each copied once)."""
    if p.header_size < 0:
        return Msg(p.subject, p.sid, p.reply, bytes(buf[start:end]))
    split = start + p.header_size
    return Msg(p.subject, p.sid, p.reply, bytes(buf[split:end]), bytes(buf[start:split]))


def _info(rest: bytes) -> Info:
    body: Any = json.loads(rest)
    if not isinstance(body, dict):
        raise NatsProtocolError("a NATS INFO is not a JSON object")
    max_payload = body.get("max_payload", DEFAULT_MAX_PAYLOAD)
    urls = body.get("connect_urls") or []
    if (not isinstance(max_payload, int) or not isinstance(urls, list)
            or not all(isinstance(u, str) for u in urls)):
        raise NatsProtocolError("a NATS INFO has fields of the wrong type")
    return Info(server_id=str(body.get("server_id", "")), version=str(body.get("version", "")),
                max_payload=max_payload, headers=body.get("headers") is True,
                connect_urls=tuple(urls))


# --- headers --------------------------------------------------------------------------------


def parse_headers(raw: bytes) -> Headers:
    """Parse a header block (from :attr:`Msg.headers`); :class:`NatsProtocolError` if broken."""
    try:
        text = raw.decode()
    except ValueError:
        raise NatsProtocolError("a NATS header block is not UTF-8") from None
    if not text.startswith(HEADER_VERSION) or not text.endswith("\r\n\r\n"):
        raise NatsProtocolError("a NATS header block does not parse")
    lines = text[:-4].split("\r\n")
    status_line = lines[0][len(HEADER_VERSION):].strip()
    status: int | None = None
    description = ""
    if status_line:
        code, _, description = status_line.partition(" ")
        if not code.isdigit():
            raise NatsProtocolError("a NATS header block has a bad status")
        status = int(code)
    fields: dict[str, str] = {}
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise NatsProtocolError("a NATS header line does not parse")
        if key not in fields:  # the first value of a key
            fields[key] = value.strip()
    return Headers(status, description.strip(), fields)


def header_value(raw: bytes, key: bytes) -> bytes | None:
    """The value of ``key`` in a header block without parsing the rest (None if absent).

    Keys are matched exactly as written; a value is taken to its line's end."""
    start = raw.find(CRLF + key + b":")
    if start < 0:
        return None
    start += len(key) + 3
    end = raw.find(CRLF, start)
    return raw[start:end if end >= 0 else len(raw)].strip()


def encode_headers(headers: dict[str, str]) -> bytes:
    lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    # Checked on the joined block (every publish comes here): a CR or LF in a key or value
    # shows as one line end too many; the loop below only names the culprit.
    n = len(headers)
    if lines.count("\r") != n or lines.count("\n") != n or any(":" in k or not k for k in headers):
        for key, value in headers.items():
            if not key or ":" in key or any(c in key + value for c in "\r\n"):
                raise LocalProtocolError(f"a NATS header cannot carry {key!r}: {value!r}")
    return f"{HEADER_VERSION}\r\n{lines}\r\n".encode()


# --- commands -------------------------------------------------------------------------------


def _token(name: str, what: str) -> bytes:
    """A subject, reply or queue name as it goes on a control line (no whitespace, not empty)."""
    if not name or any(c in name for c in " \t\r\n"):
        raise LocalProtocolError(f"not a NATS {what}: {name!r}")
    return name.encode()


def connect(*, name: str, version: str = "1", user: str | None = None,
            password: str | None = None, auth_token: str | None = None) -> bytes:
    """The CONNECT line: headers on, "no responders" statuses on, no +OK for every command,
    and the credentials of the server's URL if it has any."""
    options: dict[str, object] = {
        "verbose": False, "pedantic": False, "lang": "python-trio", "version": version,
        "protocol": 1, "headers": True, "no_responders": True, "name": name,
    }
    if user is not None:
        options.update(user=user, **{"pass": password or ""})
    if auth_token is not None:
        options["auth_token"] = auth_token
    return b"CONNECT " + json.dumps(options, separators=(",", ":")).encode() + CRLF


def pub(subject: str, payload: bytes, *, reply: str | None = None,
        headers: dict[str, str] | None = None) -> bytes:
    """A PUB, or an HPUB if there are headers."""
    head = b" ".join([_token(subject, "subject")]
                     + ([_token(reply, "reply subject")] if reply is not None else []))
    if headers:
        block = encode_headers(headers)
        return b"HPUB %s %d %d\r\n%s%s\r\n" % (head, len(block), len(block) + len(payload),
                                               block, payload)
    return b"PUB %s %d\r\n%s\r\n" % (head, len(payload), payload)


def sub(subject: str, sid: str) -> bytes:
    return b"SUB %s %s\r\n" % (_token(subject, "subject"), _token(sid, "subscription id"))


def unsub(sid: str, max_msgs: int | None = None) -> bytes:
    tail = b" %d" % max_msgs if max_msgs is not None else b""
    return b"UNSUB %s%s\r\n" % (_token(sid, "subscription id"), tail)


def parse_version(version: str) -> tuple[int, int, int]:
    """``"2.15.1"`` (or ``"2.11.0-beta"``) as numbers; ``(0, 0, 0)`` if it does not parse."""
    parts = version.split("-")[0].split(".")
    try:
        major, minor, patch = (int(p) for p in [*parts, "0", "0"][:3])
    except ValueError:
        return (0, 0, 0)
    return (major, minor, patch)


__all__ = ["DEFAULT_MAX_PAYLOAD", "PING", "PONG", "Err", "Event", "Headers", "Info", "Msg",
           "NatsParser", "NatsProtocolError", "Ok", "ParserState", "Ping", "Pong", "connect",
           "encode_headers", "header_value", "parse_headers", "parse_version", "pub", "sub",
           "unsub"]
