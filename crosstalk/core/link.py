"""The relay link's rules, with no I/O: handshake and pin, resume, requests, outbox, cursors.

Theory of operation
-------------------
One :class:`LinkMachine` lives as long as the daemon's relay-link actor instance and spans many
connections. The shell tells it what happened (``connecting``, ``connected``, ``frame_received``,
``connection_lost``, ``op_committed``, ``relay_key_pinned``, ``post_queued``, ``request``,
``tick``; ``now`` is the shell's monotonic clock) and drains :meth:`LinkMachine.data_to_send` (JSON
text frames, in order, for its one writer) and :meth:`LinkMachine.events_received`.

States (:class:`LinkState`)::

    DISCONNECTED -connecting-> CONNECTING -connected-> AUTHENTICATING -ready-> RESUMING
    RESUMING -resumed-> READY;  any connected state -lost-> DISCONNECTED

* AUTHENTICATING: the relay speaks first with ``challenge``. If a relay key is pinned for this URL
  and the challenge carries another, :class:`~crosstalk.errors.RelayKeyMismatch` is raised and we
  send nothing at all; otherwise we answer ``hello`` and check the signed ``ready`` (our own
  fingerprint, the relay's signature over the transcript). With no pin yet (first use) the
  machine emits :class:`RelayKeySeen` and holds ``resume`` until the shell has committed the pin
  and called :meth:`LinkMachine.relay_key_pinned`.
* RESUMING: ``resume`` carries every room's durable cursor (the highest seq committed here); the
  relay replays what follows each cursor, then answers ``resumed``. READY then flushes the outbox
  and any request that was waiting for a connection.
* A relay that breaks the protocol makes :meth:`LinkMachine.frame_received` raise
  :class:`~crosstalk.errors.RemoteProtocolError`: the shell drops the connection, reports
  ``connection_lost`` and reconnects after :func:`backoff_delay`. Calling an input in a state
  that does not take it is our bug: :class:`~crosstalk.errors.LocalProtocolError`, and the
  machine parks in ERROR (the supervisor then restarts the actor with a fresh machine).

Invariants:

* Nothing is acknowledged before it is committed: an inbound ``op`` becomes :class:`OpArrived`;
  the ``ack`` is queued only by :meth:`LinkMachine.op_committed`, which the shell calls after the
  op and its cursor are in the store. An op at or below the cursor is already committed: it is
  acknowledged again at once and not reported.
* Outbox order: items leave in id order, at most one ``post`` per room in flight, so a room's ops
  reach the relay in the order they were queued even when one is refused for a while
  (``rate_limited``/``backlog_full`` pause that room; other rooms keep flowing). An item leaves
  the outbox only on ``posted`` (:class:`PostAccepted`) or a permanent refusal
  (:class:`PostRejected`); a post in flight when the connection drops is sent again, and the
  relay answers a repeated ``op_id`` with the seq it already gave.
* Cursors: ``create``/``accept`` answered ``ok`` give the room a cursor of 0
  (:class:`RoomJoined`, before the reply), so it is resumed from then on; ``room_gone`` and the
  rooms ``resumed`` calls missing lose theirs (:class:`RoomLeft`). Frames not yet written when
  a connection drops are discarded; what matters (resume, posts, acks) is regenerated.
* Every request gets exactly one answer event, :class:`ReplyArrived` or :class:`RequestFailed`,
  by its deadline at the latest; a request made while not READY waits for READY until then.
  ``req`` numbers are never reused, so a late reply to an expired request is simply ignored.
  :meth:`LinkMachine.abandon_requests` answers all of them when the actor instance ends.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import NoReturn

import attrs

from crosstalk import crypto
from crosstalk.errors import (
    CrosstalkError,
    LocalProtocolError,
    NotAMember,
    NotInvited,
    RateLimited,
    RelayKeyMismatch,
    RelayUnreachable,
    RemoteProtocolError,
    SlotExpired,
    SlotNotFound,
    TooLarge,
    UnknownRoom,
)
from crosstalk.wire import relay as w

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
TRANSIENT_POST_ERRORS = frozenset({"rate_limited", "backlog_full"})
REQUEST_FRAMES = (
    w.Create, w.Add, w.Accept, w.Decline, w.Leave, w.Remove, w.GetRoster, w.ListRooms,
    w.SlotOpen, w.SlotJoin, w.SlotAttach, w.SlotSend, w.SlotClose,
)
RequestFrame = (
    w.Create | w.Add | w.Accept | w.Decline | w.Leave | w.Remove | w.GetRoster | w.ListRooms
    | w.SlotOpen | w.SlotJoin | w.SlotAttach | w.SlotSend | w.SlotClose
)


def backoff_delay(attempt: int, fraction: float) -> float:
    """Seconds to wait before reconnect ``attempt`` (1 = the first retry after a failure).

    Jittered exponential: the ceiling doubles from 1 s per attempt up to 30 s, and the delay is
    between half the ceiling and the ceiling, ``ceiling * (0.5 + fraction / 2)``, so many daemons
    dropped at once by one relay restart do not all come back in the same instant.

    Args:
        attempt: how many connection attempts have failed since the link was last READY.
        fraction: a random number in [0, 1], drawn by the shell.
    """
    if attempt < 1:
        raise LocalProtocolError(f"backoff attempts count from 1, not {attempt}")
    if not 0.0 <= fraction <= 1.0:
        raise LocalProtocolError(f"the jitter fraction must be in [0, 1], not {fraction}")
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(attempt - 1, 16))
    return ceiling * (0.5 + 0.5 * fraction)


def post_retry_delay(failures: int) -> float:
    """Seconds a room's outbox pauses after ``failures`` transient refusals: 1, 2, 4 … 30."""
    return min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(max(failures, 1) - 1, 16))


_ERRORS: dict[str, type[CrosstalkError]] = {
    "slot_not_found": SlotNotFound, "slot_expired": SlotExpired, "rate_limited": RateLimited,
    "too_large": TooLarge, "unknown_room": UnknownRoom, "not_a_member": NotAMember,
    "not_invited": NotInvited,
}


def relay_error(frame: w.Error) -> CrosstalkError:
    """The relay's ``error`` frame as our error: the same stable code, the relay's sentence."""
    message = f"The relay refused this: {frame.message}"
    cls = _ERRORS.get(frame.code)
    return cls(message) if cls is not None else CrosstalkError(message, code=frame.code)


class LinkState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    AUTHENTICATING = "authenticating"
    RESUMING = "resuming"
    READY = "ready"
    ERROR = "error"


@attrs.frozen
class OutboxItem:
    """One durable outbox row: ``id`` orders the flush."""

    id: int
    room: str
    op_id: str
    body: bytes


# --- events (drained with events_received) ---------------------------------------------------


@attrs.frozen
class RelayKeySeen:
    """First use of this URL: pin ``relay_key`` durably, then call ``relay_key_pinned``."""

    relay_key: bytes


@attrs.frozen
class LinkReady:
    """Authenticated and resumed. ``missing`` rooms are gone (their cursors were dropped)."""

    relay_key: bytes
    rooms: list[w.ResumedRoom]
    missing: list[str]


@attrs.frozen
class LinkLost:
    reason: str


@attrs.frozen
class OpArrived:
    """A new op: commit it with its cursor, then call ``op_committed(room, seq)``."""

    op: w.Op


@attrs.frozen
class PostAccepted:
    item: OutboxItem
    seq: int


@attrs.frozen(eq=False)
class PostRejected:
    """The relay will never take this item; it leaves the outbox."""

    item: OutboxItem
    error: CrosstalkError


@attrs.frozen
class RoomJoined:
    """We created or accepted ``room``: give it a durable cursor (0) so it is resumed."""

    room: str


@attrs.frozen
class RoomLeft:
    """``room`` is no longer ours: drop its durable cursor."""

    room: str


@attrs.frozen
class ReplyArrived:
    token: Hashable
    frame: w.RelayFrame


@attrs.frozen(eq=False)
class RequestFailed:
    token: Hashable
    error: CrosstalkError


@attrs.frozen
class PushArrived:
    """roster, invited, room_gone, presence, slot_joined, slot_msg or slot_closed."""

    frame: w.RelayFrame


@attrs.frozen
class RelayComplained:
    """An ``error`` frame that answers no request (e.g. about an ``ack``)."""

    code: str
    message: str


LinkEvent = (
    RelayKeySeen | LinkReady | LinkLost | OpArrived | PostAccepted | PostRejected | RoomJoined
    | RoomLeft | ReplyArrived | RequestFailed | PushArrived | RelayComplained
)


@attrs.define
class _Request:
    token: Hashable
    frame: RequestFrame
    deadline: float
    timeout: float


@attrs.frozen
class _Resume:
    pass


@attrs.frozen
class _PostReq:
    item: OutboxItem


_Pending = _Request | _Resume | _PostReq
_CONNECTED = (LinkState.AUTHENTICATING, LinkState.RESUMING, LinkState.READY)
_PUSHES = (w.Invited, w.RoomGone, w.Presence, w.SlotMsg, w.SlotClosed)


class LinkMachine:
    """The relay link's state, across connections (see the module docstring).

    Args:
        keys: this identity's keys (they sign ``hello``).
        device: this home's device id.
        url: the relay URL, for messages.
        pinned_key: the relay key pinned for ``url``, or ``None`` (pin on first use).
        cursors: each room's durable cursor.
        outbox: the durable outbox rows still to send, in any order.
    """

    def __init__(
        self,
        *,
        keys: crypto.Keys,
        device: str,
        url: str,
        pinned_key: bytes | None = None,
        cursors: Mapping[str, int] | None = None,
        outbox: Iterable[OutboxItem] = (),
    ) -> None:
        self._keys = keys
        self._device = device
        self._url = url
        self._pinned = pinned_key
        self._cursors = dict(cursors or {})
        self._queued = {item.id: item for item in sorted(outbox, key=lambda i: i.id)}
        self._state = LinkState.DISCONNECTED
        self._attempts = 0
        self._last_error: str | None = None
        self._challenge: w.Challenge | None = None
        self._next_req = 1
        self._pending: dict[int, _Pending] = {}
        self._held: list[_Request] = []  # requests waiting for READY
        self._busy: set[str] = set()  # rooms with a post in flight
        self._paused: dict[str, float] = {}  # room -> when its outbox may flow again
        self._failures: dict[str, int] = {}
        self._out: list[str] = []
        self._events: list[LinkEvent] = []

    # --- what the shell reads ---------------------------------------------------------------

    @property
    def state(self) -> LinkState:
        return self._state

    @property
    def attempts(self) -> int:
        """Connection attempts that failed since the link was last READY."""
        return self._attempts

    @property
    def last_error(self) -> str | None:
        return self._last_error

    @property
    def relay_key(self) -> bytes | None:
        """The pinned relay key (``None`` until first use has been pinned)."""
        return self._pinned

    @property
    def cursors(self) -> dict[str, int]:
        return dict(self._cursors)

    @property
    def queued(self) -> int:
        """Outbox items not yet accepted by the relay."""
        return len(self._queued)

    def data_to_send(self) -> list[str]:
        """Drain the frames to write, in order."""
        out, self._out = self._out, []
        return out

    def events_received(self) -> list[LinkEvent]:
        """Drain what happened, in order."""
        events, self._events = self._events, []
        return events

    def events_returned(self, events: Sequence[LinkEvent]) -> None:
        """Put back drained events the shell could not carry out, ahead of any newer ones.

        The shell's handling of every event is idempotent, so an event it was half-way through
        is simply carried out again by the next drain.
        """
        self._events[:0] = events

    def next_deadline(self) -> float:
        """When :meth:`tick` next has work: a request deadline or a paused room (or inf)."""
        times = [r.deadline for r in self._held]
        times += [p.deadline for p in self._pending.values() if isinstance(p, _Request)]
        times += self._paused.values()
        return min(times, default=math.inf)

    def retry_delay(self, fraction: float) -> float:
        """How long to wait before the next connection attempt (see :func:`backoff_delay`)."""
        return backoff_delay(max(self._attempts, 1), fraction)

    # --- connection lifecycle -----------------------------------------------------------------

    def connecting(self, now: float) -> None:
        """The shell starts opening a WebSocket."""
        self._move("connecting")

    def connected(self, now: float) -> None:
        """The WebSocket is open; the relay's challenge comes next."""
        self._move("connected")
        self._challenge = None

    def connection_lost(self, reason: str, now: float) -> None:
        """The attempt failed or the connection dropped, for ``reason``."""
        self._move("lost")
        self._attempts += 1
        self._last_error = reason
        self._challenge = None
        self._busy.clear()
        self._out.clear()  # frames for a dead connection; the next one resends what matters
        for pending in self._pending.values():
            if isinstance(pending, _Request):
                error = RelayUnreachable(
                    f"The connection to the relay at {self._url} dropped before it answered "
                    f"({reason}); try again."
                )
                self._events.append(RequestFailed(pending.token, error))
        self._pending.clear()
        self._events.append(LinkLost(reason))

    def abandon_requests(self, reason: str) -> None:
        """The link is going away: answer every open request with RelayUnreachable now."""
        error = RelayUnreachable(f"The relay link stopped ({reason}); try again.")
        tokens = [r.token for r in self._held]
        tokens += [p.token for p in self._pending.values() if isinstance(p, _Request)]
        self._held.clear()
        self._pending = {k: p for k, p in self._pending.items() if not isinstance(p, _Request)}
        self._events.extend(RequestFailed(token, error) for token in tokens)

    def relay_key_pinned(self, now: float) -> None:
        """The relay key seen on first use is now pinned durably: resume."""
        challenge = self._challenge
        if self._state is not LinkState.RESUMING or challenge is None or self._pinned:
            self._fail(f"relay_key_pinned while {self._state.value}")
        self._pinned = challenge.relay_key
        self._send_resume()

    # --- frames ---------------------------------------------------------------------------

    def frame_received(self, text: str | bytes, now: float) -> None:
        """One frame from the relay.

        Raises:
            RelayKeyMismatch: the relay's key differs from the one pinned for this URL.
            RemoteProtocolError: the relay broke the protocol; drop the connection.
        """
        if self._state not in _CONNECTED:
            self._fail(f"frame_received while {self._state.value}")
        frame = w.decode_relay_frame(text)
        if self._state is LinkState.AUTHENTICATING:
            self._authenticate(frame)
        elif isinstance(frame, w.Op):
            self._on_op(frame)
        elif isinstance(frame, _PUSHES) or getattr(frame, "req", 0) is None:
            self._on_push(frame)
        elif isinstance(frame, w.Challenge | w.Ready):
            raise RemoteProtocolError(f"the relay sent {w.tag_of(frame)} after the handshake")
        else:
            self._on_reply(frame, now)

    def _authenticate(self, frame: w.RelayFrame) -> None:
        if isinstance(frame, w.Error):
            raise RemoteProtocolError(f"the relay refused us ({frame.code}): {frame.message}")
        if isinstance(frame, w.Challenge) and self._challenge is None:
            self._on_challenge(frame)
        elif isinstance(frame, w.Ready) and self._challenge is not None:
            self._on_ready(frame)
        else:
            raise RemoteProtocolError(f"the relay sent {w.tag_of(frame)} during the handshake")

    def _on_challenge(self, frame: w.Challenge) -> None:
        if frame.version != w.PROTOCOL_VERSION:
            raise RemoteProtocolError(
                f"the relay speaks protocol {frame.version}, we speak {w.PROTOCOL_VERSION}"
            )
        if len(frame.relay_key) != 32 or len(frame.nonce) != w.NONCE_SIZE:
            raise RemoteProtocolError("the relay's challenge has a key or nonce of the wrong size")
        if self._pinned is not None and frame.relay_key != self._pinned:
            raise RelayKeyMismatch(
                f"The relay at {self._url} presented key {frame.relay_key.hex()[:16]}…, not the "
                f"key {self._pinned.hex()[:16]}… pinned for it, so crosstalk will not talk to "
                "it. If its operator really replaced the key, re-pair or re-link to pin the new "
                "one; otherwise someone may be impersonating the relay."
            )
        self._challenge = frame
        keys = self._keys
        transcript = w.hello_transcript(
            frame.nonce, frame.relay_key, keys.ed_pub, keys.x_pub, self._device,
            w.PROTOCOL_VERSION,
        )
        sig = crypto.sign(keys, transcript)
        self._write(w.Hello(keys.ed_pub, keys.x_pub, self._device, w.PROTOCOL_VERSION, sig))

    def _on_ready(self, frame: w.Ready) -> None:
        challenge, keys = self._challenge, self._keys
        assert challenge is not None
        if frame.fingerprint != keys.fingerprint:
            raise RemoteProtocolError(f"the relay took us for {frame.fingerprint!r}")
        transcript = w.ready_transcript(
            challenge.nonce, challenge.relay_key, keys.ed_pub, keys.x_pub
        )
        crypto.verify(challenge.relay_key, transcript, frame.sig)
        self._move("ready")
        if self._pinned is None:
            self._events.append(RelayKeySeen(challenge.relay_key))
        else:
            self._send_resume()

    def _send_resume(self) -> None:
        req = self._take_req()
        self._pending[req] = _Resume()
        self._write(w.Resume(req, dict(self._cursors)))

    def _on_op(self, op: w.Op) -> None:
        if op.seq <= self._cursors.get(op.room, 0):
            self._write(w.Ack(op.room, op.seq))  # committed before: safe to acknowledge again
        else:
            self._events.append(OpArrived(op))

    def _on_push(self, frame: w.RelayFrame) -> None:
        if isinstance(frame, w.Error):
            self._events.append(RelayComplained(frame.code, frame.message))
            return
        if isinstance(frame, w.RoomGone):
            self._leave(frame.room)
        self._events.append(PushArrived(frame))

    def _on_reply(self, frame: w.RelayFrame, now: float) -> None:
        pending = self._pending.pop(getattr(frame, "req", -1), None)
        if pending is None:
            return  # the answer to a request that already expired
        if isinstance(pending, _Resume):
            self._on_resumed(frame, now)
        elif isinstance(pending, _PostReq):
            self._on_posted(pending.item, frame, now)
        elif isinstance(frame, w.Error):
            self._events.append(RequestFailed(pending.token, relay_error(frame)))
        else:
            sent = pending.frame
            if isinstance(sent, w.Create | w.Accept) and isinstance(frame, w.Ok):
                if sent.room not in self._cursors:
                    self._cursors[sent.room] = 0
                    self._events.append(RoomJoined(sent.room))
            self._events.append(ReplyArrived(pending.token, frame))

    def _on_resumed(self, frame: w.RelayFrame, now: float) -> None:
        if isinstance(frame, w.Error):
            raise RemoteProtocolError(f"the relay refused resume ({frame.code}): {frame.message}")
        if not isinstance(frame, w.Resumed):
            raise RemoteProtocolError(f"the relay answered resume with {w.tag_of(frame)}")
        self._move("resumed")
        self._attempts = 0
        for room in frame.missing:
            self._leave(room)
        assert self._pinned is not None
        self._events.append(LinkReady(self._pinned, list(frame.rooms), list(frame.missing)))
        held, self._held = self._held, []
        for request in held:
            self._send_request(request)
        self._pump(now)

    def _on_posted(self, item: OutboxItem, frame: w.RelayFrame, now: float) -> None:
        self._busy.discard(item.room)
        if isinstance(frame, w.Posted) and frame.room == item.room:
            self._queued.pop(item.id, None)
            self._failures.pop(item.room, None)
            self._events.append(PostAccepted(item, frame.seq))
        elif isinstance(frame, w.Error) and frame.code in TRANSIENT_POST_ERRORS:
            failures = self._failures[item.room] = self._failures.get(item.room, 0) + 1
            self._paused[item.room] = now + post_retry_delay(failures)
        elif isinstance(frame, w.Error):
            self._queued.pop(item.id, None)
            self._events.append(PostRejected(item, relay_error(frame)))
        else:
            raise RemoteProtocolError(f"the relay answered post with {w.tag_of(frame)}")
        self._pump(now)

    def _leave(self, room: str) -> None:
        if self._cursors.pop(room, None) is not None:
            self._events.append(RoomLeft(room))

    # --- from the rest of the daemon ------------------------------------------------------------

    def op_committed(self, room: str, seq: int) -> None:
        """An op and its cursor are committed: advance the cursor and acknowledge it."""
        self._cursors[room] = max(seq, self._cursors.get(room, 0))
        if self._state in _CONNECTED:  # else the connection dropped; resume carries the cursor
            self._write(w.Ack(room, seq))

    def post_queued(self, item: OutboxItem, now: float) -> None:
        """A post is committed to the outbox: send it when its turn comes."""
        if item.id not in self._queued:
            self._queued[item.id] = item
            self._pump(now)

    def request(
        self, frame: RequestFrame, token: Hashable, *, now: float, timeout: float
    ) -> None:
        """Send a request (its ``req`` is replaced) now or once READY, answered by ``timeout``."""
        if not isinstance(frame, REQUEST_FRAMES):
            raise LocalProtocolError(f"{type(frame).__name__} is not a request the link forwards")
        request = _Request(token, frame, now + timeout, timeout)
        if self._state is LinkState.READY:
            self._send_request(request)
        else:
            self._held.append(request)

    def tick(self, now: float) -> None:
        """Expire overdue requests and let paused rooms flow again."""
        for request in [r for r in self._held if r.deadline <= now]:
            self._held.remove(request)
            reason = f" ({self._last_error})" if self._last_error else ""
            error = RelayUnreachable(
                f"Not connected to the relay at {self._url}{reason}; crosstalk keeps retrying."
            )
            self._events.append(RequestFailed(request.token, error))
        for req, pending in list(self._pending.items()):
            if isinstance(pending, _Request) and pending.deadline <= now:
                del self._pending[req]
                error = RelayUnreachable(
                    f"The relay at {self._url} did not answer within {pending.timeout:g} s."
                )
                self._events.append(RequestFailed(pending.token, error))
        for room in [r for r, until in self._paused.items() if until <= now]:
            del self._paused[room]
        self._pump(now)

    # --- internals --------------------------------------------------------------------------

    def _send_request(self, request: _Request) -> None:
        req = self._take_req()
        self._pending[req] = request
        self._write(attrs.evolve(request.frame, req=req))

    def _pump(self, now: float) -> None:
        """Send the first queued item of every room that is neither busy nor paused."""
        if self._state is not LinkState.READY:
            return
        seen = set(self._busy)
        for item in self._queued.values():
            if item.room in seen:
                continue
            seen.add(item.room)
            if self._paused.get(item.room, -math.inf) > now:
                continue
            req = self._take_req()
            self._pending[req] = _PostReq(item)
            self._busy.add(item.room)
            self._write(w.Post(req, item.room, item.op_id, item.body))

    def _take_req(self) -> int:
        req, self._next_req = self._next_req, self._next_req + 1
        return req

    def _write(self, frame: w.ClientFrame) -> None:
        self._out.append(w.encode_frame(frame))

    def _move(self, happened: str) -> None:
        next_state = _TRANSITIONS.get(self._state, {}).get(happened)
        if next_state is None:
            self._fail(f"{happened} while {self._state.value}")
        self._state = next_state

    def _fail(self, what: str) -> NoReturn:
        self._state = LinkState.ERROR
        raise LocalProtocolError(f"the relay link cannot take {what}")


# What may happen in each state, and where it leads (h11 ``_state.py`` keeps its table this way).
_LOST = {"lost": LinkState.DISCONNECTED}
_TRANSITIONS: dict[LinkState, dict[str, LinkState]] = {
    LinkState.DISCONNECTED: {"connecting": LinkState.CONNECTING},
    LinkState.CONNECTING: {"connected": LinkState.AUTHENTICATING, **_LOST},
    LinkState.AUTHENTICATING: {"ready": LinkState.RESUMING, **_LOST},
    LinkState.RESUMING: {"resumed": LinkState.READY, **_LOST},
    LinkState.READY: _LOST,
}
