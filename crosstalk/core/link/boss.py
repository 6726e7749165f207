"""The relay link's boss: owns the four small machines and routes every input to the right one.

Theory of operation
-------------------
One :class:`LinkBoss` lives as long as the daemon's relay-link actor instance and spans many
connections. It owns a :class:`~crosstalk.core.link.handshake.Handshake`, a
:class:`~crosstalk.core.link.resume.Resume` (the cursors), a
:class:`~crosstalk.core.link.requests.Requests` and an :class:`~crosstalk.core.link.outbox.Outbox`,
and the ``req`` counter they share; none of them knows the others (magic-wormhole's ``_boss.py``
composes its machines the same way). The shell tells the boss what happened (``start``,
``connected``, ``frame_received``, ``connection_lost``, ``relay_key_pinned``, ``op_committed``,
``post_queued``, ``resealed``, ``request``, ``retry_now``, ``tick``; ``now`` is the shell's
monotonic clock) and drains :meth:`LinkBoss.data_to_send` (JSON text frames for its one writer) and
:meth:`LinkBoss.events_received`.

States (:class:`LinkState`)::

    DISCONNECTED -dial-> CONNECTING -connected-> AUTHENTICATING -authenticated-> RESUMING
    RESUMING -resumed-> READY;   CONNECTING and every connected state -lost-> DISCONNECTED

* The boss decides when to connect: ``start`` and the end of each backoff emit
  :class:`~crosstalk.core.link.events.Dial`; ``connection_lost`` schedules the next one after
  :func:`~crosstalk.core.link.common.backoff_delay` (``retry_now`` cuts that wait short, or
  makes the attempt under way the last one before dialing again at once).
* Routing: while authenticating every frame goes to the handshake. After it, an ``op`` goes to
  the resume machine (cursors), a reply to whichever machine owns its ``req`` (resume, outbox or
  requests; no owner: the reply to an expired request, ignored), pushes straight out. A
  ``roster`` reply is also a push (:class:`~crosstalk.core.link.events.PushArrived`, emitted
  before the request's answer), so every roster leaves the boss in the relay's order.
* A relay that breaks the protocol, shows another key, or does not finish the handshake within
  ``handshake_timeout``: the boss emits :class:`~crosstalk.core.link.events.Drop` and ignores the
  rest of that connection until ``connection_lost``. Calling an input in a state that does not
  take it is our bug: :class:`~crosstalk.errors.LocalProtocolError`, the boss parks in ERROR.
* READY (``resumed``) sends the requests held for it and pumps the outbox; so does every event
  that frees a room. Frames not yet written when a connection drops are discarded; what
  matters (resume, posts, acks) is made again. The machines' own docstrings hold their
  invariants (nothing acknowledged before it is committed; outbox order; one answer per request).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Iterable, Mapping
from typing import NoReturn

from crosstalk import crypto
from crosstalk.core.link import events as ev
from crosstalk.core.link.common import (
    OutboxItem,
    ReqNumbers,
    RequestFrame,
    Resealed,
    backoff_delay,
)
from crosstalk.core.link.common import next_state as _next_state
from crosstalk.core.link.handshake import Handshake
from crosstalk.core.link.outbox import Outbox
from crosstalk.core.link.requests import Requests
from crosstalk.core.link.resume import Resume
from crosstalk.errors import LocalProtocolError, RelayKeyMismatch, RemoteProtocolError
from crosstalk.wire import relay as w


class LinkState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    AUTHENTICATING = "authenticating"
    RESUMING = "resuming"
    READY = "ready"
    ERROR = "error"


_CONNECTED = (LinkState.AUTHENTICATING, LinkState.RESUMING, LinkState.READY)
_PUSHES = (w.Invited, w.RoomGone, w.Presence, w.SlotMsg, w.SlotClosed)


class LinkBoss:
    """The relay link's state across connections (see the module docstring).

    Args:
        keys: this identity's keys (they sign ``hello``).
        device: this home's device id.
        url: the relay URL, for messages.
        pinned_key: the relay key pinned for ``url``, or ``None`` (pin on first use).
        cursors: each room's durable cursor.
        outbox: the durable outbox rows still to send, in any order.
        outbox_through: the highest outbox id ever committed when ``outbox`` was loaded: a post
            handed over later with an id up to it was in ``outbox`` or has left it already.
        handshake_timeout: seconds from ``connected`` to READY before the connection is dropped.
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
        outbox_through: int = 0,
        handshake_timeout: float = 10.0,
    ) -> None:
        reqs = ReqNumbers()
        self._url = url
        self._me = keys.fingerprint
        self._handshake = Handshake(keys=keys, device=device, url=url, pinned_key=pinned_key)
        self._resume = Resume(cursors or {})
        self._requests = Requests(url=url, reqs=reqs)
        self._outbox = Outbox(outbox, reqs=reqs, through=outbox_through)
        self._reqs = reqs
        self._handshake_timeout = handshake_timeout
        self._state = LinkState.DISCONNECTED
        self._attempts = 0
        self._last_error: str | None = None
        self._redial_at = math.inf  # when DISCONNECTED: when to dial again
        self._handshake_by = math.inf  # when connected and not READY: when to give up
        self._dropping = False  # a Drop was emitted: ignore the connection until it is lost
        self._retry_asap = False  # retry_now came while an attempt was under way
        self._out: list[str] = []
        self._events: list[ev.LinkEvent] = []

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
        return self._handshake.relay_key

    @property
    def cursors(self) -> dict[str, int]:
        return self._resume.cursors

    @property
    def queued(self) -> int:
        """Outbox items not yet accepted by the relay."""
        return self._outbox.queued

    def data_to_send(self) -> list[str]:
        """Drain the frames to write, in order."""
        out, self._out = self._out, []
        return out

    def events_received(self) -> list[ev.LinkEvent]:
        """Drain what happened, in order."""
        events, self._events = self._events, []
        return events

    def next_deadline(self) -> float:
        """When :meth:`tick` next has work (inf: nothing is timed)."""
        times = [self._requests.next_deadline(), self._outbox.next_deadline()]
        if self._state is LinkState.DISCONNECTED:
            times.append(self._redial_at)
        elif self._state in (LinkState.AUTHENTICATING, LinkState.RESUMING) and not self._dropping:
            times.append(self._handshake_by)
        return min(times)

    # --- the connection -------------------------------------------------------------------

    def start(self, now: float) -> None:
        """The shell is up: connect at once."""
        self._dial()

    def retry_now(self, now: float) -> None:
        """The relay is known to be back: if waiting out a backoff, dial now; if an attempt is
        under way and it fails, dial again at once instead of backing off."""
        if self._state is LinkState.DISCONNECTED and self._redial_at < math.inf:
            self._dial()
        elif self._state is not LinkState.READY:
            self._retry_asap = True

    def connected(self, now: float) -> None:
        """The WebSocket is open; the relay's challenge comes next."""
        self._move("connected")
        self._handshake.connected()
        self._handshake_by = now + self._handshake_timeout
        self._dropping = False

    def connection_lost(self, reason: str, now: float, fraction: float) -> None:
        """The attempt failed or the connection ended, for ``reason``; ``fraction`` in [0, 1]
        draws the backoff's jitter."""
        self._move("lost")
        self._attempts += 1
        self._last_error = reason
        self._dropping = False
        self._handshake.lost()
        self._resume.lost()
        self._outbox.lost()
        self._out.clear()  # frames for a dead connection; the next one makes what matters again
        self._events.extend(self._requests.lost(reason))
        delay = 0.0 if self._retry_asap else backoff_delay(self._attempts, fraction)
        self._retry_asap = False
        self._redial_at = now + delay
        self._events.append(ev.LinkLost(reason, delay))

    def frame_received(self, text: str | bytes, now: float) -> None:
        """One frame from the relay. A bad one yields :class:`Drop`; it never raises for it."""
        if self._state not in _CONNECTED:
            self._fail(f"frame_received while {self._state.value}")
        if self._dropping:
            return  # the rest of a connection we are closing
        try:
            self._route(w.decode_relay_frame(text), now)
        except RelayKeyMismatch as exc:
            self._drop(exc.message, refused_key=True)
        except RemoteProtocolError as exc:
            self._drop(exc.message)

    def relay_key_pinned(self, key: bytes, now: float) -> None:
        """``key`` (from :class:`RelayKeySeen`) is pinned durably: resume, if still connected."""
        done = self._handshake.key_pinned(key)
        if done is not None and not self._dropping:
            self._authenticated(now)

    # --- from the rest of the daemon ----------------------------------------------------------

    def op_committed(self, room: str, seq: int) -> None:
        """An op and its cursor are committed: advance the cursor and acknowledge it."""
        ack = self._resume.committed(room, seq)
        if self._state in (LinkState.RESUMING, LinkState.READY) and not self._dropping:
            self._write(ack)  # otherwise the next resume carries the cursor

    def post_queued(self, item: OutboxItem, now: float) -> None:
        """A post is committed to the outbox: send it when its turn comes."""
        self._outbox.add(item)
        self._pump(now)

    def resealed(self, asked: OutboxItem, answer: Resealed, now: float) -> None:
        """The answer to :class:`~crosstalk.core.link.events.ResealWanted` for ``asked``."""
        self._outbox.resealed(asked, answer)
        self._pump(now)

    def request(
        self, frame: RequestFrame, token: Hashable, *, now: float, timeout: float
    ) -> None:
        """Send a request (its ``req`` is replaced) now or once READY, answered by ``timeout``."""
        self._requests.add(frame, token, now=now, timeout=timeout)
        self._send_held(now)

    def tick(self, now: float) -> None:
        """Time passed: expire requests, let paused rooms flow, redial, give up a handshake."""
        self._events.extend(self._requests.expire(now, self._last_error))
        self._outbox.expire(now)
        if self._state is LinkState.DISCONNECTED and self._redial_at <= now:
            self._dial()
        elif self._state in (LinkState.AUTHENTICATING, LinkState.RESUMING) and (
            not self._dropping and self._handshake_by <= now
        ):
            self._drop(f"the relay did not finish the handshake within "
                       f"{self._handshake_timeout:g} s")
        self._pump(now)
        self._send_held(now)

    def abandon_requests(self, reason: str) -> None:
        """The link is going away: answer every open request with RelayUnreachable now."""
        self._events.extend(self._requests.abandon(reason))

    # --- routing ----------------------------------------------------------------------------

    def _route(self, frame: w.RelayFrame, now: float) -> None:
        if self._state is LinkState.AUTHENTICATING:
            self._on_handshake(frame, now)
        elif isinstance(frame, w.Op):
            self._on_op(frame)
        elif isinstance(frame, _PUSHES) or getattr(frame, "req", 0) is None:
            self._on_push(frame)
        elif isinstance(frame, w.Challenge | w.Ready):
            raise RemoteProtocolError(f"the relay sent {w.tag_of(frame)} after the handshake")
        else:
            self._on_reply(frame, now)

    def _on_handshake(self, frame: w.RelayFrame, now: float) -> None:
        step = self._handshake.frame_received(frame)
        if isinstance(step, w.Hello):
            self._write(step)
        elif isinstance(step, ev.RelayKeySeen):
            self._move("authenticated")  # the resume waits for relay_key_pinned
            self._events.append(step)
        else:
            self._move("authenticated")
            self._authenticated(now)

    def _authenticated(self, now: float) -> None:
        self._write(self._resume.start(self._reqs.take()))

    def _on_op(self, op: w.Op) -> None:
        self._outbox.epoch_seen(op.room, op.body)
        if op.sender == self._me and (taken := self._outbox.came_back(op)) is not None:
            self._events.append(taken)
        got = self._resume.op_received(op)
        if isinstance(got, w.Ack):
            self._write(got)
        elif got is not None:
            self._events.append(got)

    def _on_push(self, frame: w.RelayFrame) -> None:
        if isinstance(frame, w.Error):
            self._events.append(ev.RelayComplained(frame.code, frame.message))
            return
        if isinstance(frame, w.RoomGone) and (left := self._resume.left(frame.room)):
            self._events.append(left)
        self._events.append(ev.PushArrived(frame))

    def _on_reply(self, frame: w.RelayFrame, now: float) -> None:
        req = getattr(frame, "req", -1)
        if isinstance(frame, w.Roster):
            # A roster is news however it came: told first, it reaches the membership actor in
            # the order the relay sent it, among the pushes, before its requester hears it.
            self._events.append(ev.PushArrived(frame))
        if self._resume.owns(req):
            self._on_resumed(frame, now)
        elif self._outbox.owns(req):
            if (outcome := self._outbox.answered(req, frame, now)) is not None:
                self._events.append(outcome)
            self._pump(now)
            self._send_held(now)  # a leave waits for its room's posts
        elif self._requests.owns(req):
            answered = self._requests.answered(req, frame)
            sent = answered.sent
            if isinstance(sent, w.Create | w.Accept) and isinstance(frame, w.Ok):
                if (joined := self._resume.joined(sent.room)) is not None:
                    self._events.append(joined)
            self._events.append(answered.event)
        # else: the answer to a request that already expired

    def _on_resumed(self, frame: w.RelayFrame, now: float) -> None:
        self._events.extend(self._resume.resumed(frame))
        self._move("resumed")
        self._attempts = 0
        self._retry_asap = False
        missing = list(frame.missing) if isinstance(frame, w.Resumed) else []
        rooms = list(frame.rooms) if isinstance(frame, w.Resumed) else []
        key = self._handshake.relay_key
        assert key is not None, "READY only after the key is pinned"
        self._events.append(ev.LinkReady(key, rooms, missing))
        self._send_held(now)
        self._pump(now)

    # --- internals --------------------------------------------------------------------------

    def _send_held(self, now: float) -> None:
        if self._state is LinkState.READY and not self._dropping:
            for sent in self._requests.send_held(now, self._outbox.rooms()):
                self._write(sent)

    def _pump(self, now: float) -> None:
        if self._state is LinkState.READY and not self._dropping:
            for post in self._outbox.pump(now):
                self._write(post)
            self._events.extend(self._outbox.asks())

    def _dial(self) -> None:
        self._move("dial")
        self._redial_at = math.inf
        self._events.append(ev.Dial())

    def _drop(self, reason: str, *, refused_key: bool = False) -> None:
        self._dropping = True
        self._events.append(ev.Drop(reason, refused_key))

    def _write(self, frame: w.ClientFrame) -> None:
        self._out.append(w.encode_frame(frame))

    def _move(self, happened: str) -> None:
        try:
            self._state = _next_state(_TRANSITIONS, self._state, happened, "boss")
        except LocalProtocolError:
            self._state = LinkState.ERROR
            raise

    def _fail(self, what: str) -> NoReturn:
        self._state = LinkState.ERROR
        raise LocalProtocolError(f"the relay link cannot take {what}")


# What may happen in each state, and where it leads (h11 ``_state.py`` keeps its table this way).
_S = LinkState
_LOST = {"lost": _S.DISCONNECTED}
_TRANSITIONS: dict[LinkState, dict[str, LinkState]] = {
    _S.DISCONNECTED: {"dial": _S.CONNECTING},
    _S.CONNECTING: {"connected": _S.AUTHENTICATING, **_LOST},
    _S.AUTHENTICATING: {"authenticated": _S.RESUMING, **_LOST},
    _S.RESUMING: {"resumed": _S.READY, **_LOST},
    _S.READY: _LOST,
}
