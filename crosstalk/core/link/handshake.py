"""The relay link's handshake: challenge, signed hello, signed ready, and the key pin.

Theory of operation
-------------------
One :class:`Handshake` per link, reused by every connection. The relay speaks first::

    IDLE -connected-> AWAIT_CHALLENGE -challenge-> AWAIT_READY -ready-> DONE
                                                               -ready, no pin yet-> AWAIT_PIN
    AWAIT_PIN -pinned-> DONE;   any state -lost-> IDLE

* ``challenge`` carries the relay's key and a nonce. If a key is pinned for this URL and the
  challenge shows another, :class:`~crosstalk.errors.RelayKeyMismatch` is raised before we say
  anything at all; otherwise the answer is ``hello``, signed over the transcript.
* ``ready`` must name our fingerprint and carry the relay's signature over the transcript.
  With a pin, that is the end (:class:`Authenticated`). On first use the key is reported
  (:class:`~crosstalk.core.link.events.RelayKeySeen`) and the handshake waits in AWAIT_PIN until
  the shell has committed the pin: nothing is resumed on a key we might forget.
* A pin committed after its connection dropped still counts (``key_pinned`` takes it in any
  state): it is durable, and the next challenge must show the same key.

A relay that breaks this order raises :class:`~crosstalk.errors.RemoteProtocolError`; a call in a
state that does not take it raises :class:`~crosstalk.errors.LocalProtocolError` and parks the
machine in ERROR.
"""

from __future__ import annotations

import enum
from typing import NoReturn

import attrs

from crosstalk import crypto
from crosstalk.core.link.common import next_state
from crosstalk.core.link.events import RelayKeySeen
from crosstalk.errors import LocalProtocolError, RelayKeyMismatch, RemoteProtocolError
from crosstalk.wire import relay as w


class HandshakeState(enum.Enum):
    IDLE = "idle"
    AWAIT_CHALLENGE = "awaiting challenge"
    AWAIT_READY = "awaiting ready"
    AWAIT_PIN = "awaiting the pin"
    DONE = "done"
    ERROR = "error"


@attrs.frozen
class Authenticated:
    """The relay proved its key, which is pinned: resume now."""

    relay_key: bytes


HandshakeStep = w.Hello | RelayKeySeen | Authenticated


class Handshake:
    """Authenticates each connection (see the module docstring).

    Args:
        keys: this identity's keys (they sign ``hello``).
        device: this home's device id.
        url: the relay URL, for messages.
        pinned_key: the relay key pinned for ``url``, or ``None`` (pin on first use).
    """

    def __init__(
        self, *, keys: crypto.Keys, device: str, url: str, pinned_key: bytes | None
    ) -> None:
        self._keys = keys
        self._device = device
        self._url = url
        self._pinned = pinned_key
        self._challenge: w.Challenge | None = None
        self._state = HandshakeState.IDLE

    @property
    def state(self) -> HandshakeState:
        return self._state

    @property
    def relay_key(self) -> bytes | None:
        """The pinned relay key (``None`` until first use has been pinned)."""
        return self._pinned

    def connected(self) -> None:
        """A WebSocket is open; the relay's challenge comes next."""
        self._move("connected")
        self._challenge = None

    def lost(self) -> None:
        """The connection ended; whatever it had shown is forgotten (the pin is kept)."""
        self._move("lost")
        self._challenge = None

    def frame_received(self, frame: w.RelayFrame) -> HandshakeStep:
        """A frame while authenticating: the hello to send, the key to pin, or done.

        Raises:
            RelayKeyMismatch: the relay's key differs from the one pinned for this URL.
            RemoteProtocolError: the relay broke the handshake.
        """
        if self._state not in (HandshakeState.AWAIT_CHALLENGE, HandshakeState.AWAIT_READY):
            self._fail(f"a frame while {self._state.value}")
        if isinstance(frame, w.Error):
            raise RemoteProtocolError(f"the relay refused us ({frame.code}): {frame.message}")
        if isinstance(frame, w.Challenge) and self._state is HandshakeState.AWAIT_CHALLENGE:
            return self._on_challenge(frame)
        if isinstance(frame, w.Ready) and self._state is HandshakeState.AWAIT_READY:
            return self._on_ready(frame)
        raise RemoteProtocolError(f"the relay sent {w.tag_of(frame)} during the handshake")

    def key_pinned(self, key: bytes) -> Authenticated | None:
        """``key`` is now pinned durably; :class:`Authenticated` if that ends a handshake."""
        if self._pinned is not None and self._pinned != key:
            self._fail("a second, different relay key to pin")
        self._pinned = key
        if self._state is not HandshakeState.AWAIT_PIN:
            return None  # its connection is gone; the pin stands for the next one
        self._move("pinned")
        return Authenticated(key)

    def _on_challenge(self, frame: w.Challenge) -> w.Hello:
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
        self._move("challenge")
        self._challenge = frame
        keys = self._keys
        transcript = w.hello_transcript(
            frame.nonce, frame.relay_key, keys.ed_pub, keys.x_pub, self._device,
            w.PROTOCOL_VERSION,
        )
        sig = crypto.sign(keys, transcript)
        return w.Hello(keys.ed_pub, keys.x_pub, self._device, w.PROTOCOL_VERSION, sig)

    def _on_ready(self, frame: w.Ready) -> RelayKeySeen | Authenticated:
        challenge, keys = self._challenge, self._keys
        assert challenge is not None, "AWAIT_READY always has its challenge"
        if frame.fingerprint != keys.fingerprint:
            raise RemoteProtocolError(f"the relay took us for {frame.fingerprint!r}")
        transcript = w.ready_transcript(
            challenge.nonce, challenge.relay_key, keys.ed_pub, keys.x_pub
        )
        crypto.verify(challenge.relay_key, transcript, frame.sig)
        if self._pinned is None:
            self._move("ready, no pin")
            return RelayKeySeen(challenge.relay_key)
        self._move("ready")
        return Authenticated(self._pinned)

    def _move(self, happened: str) -> None:
        try:
            self._state = next_state(_TRANSITIONS, self._state, happened, "handshake")
        except LocalProtocolError:
            self._state = HandshakeState.ERROR
            raise

    def _fail(self, what: str) -> NoReturn:
        self._state = HandshakeState.ERROR
        raise LocalProtocolError(f"the relay link's handshake cannot take {what}")


_S = HandshakeState
_LOST = {"lost": _S.IDLE}
_TRANSITIONS: dict[HandshakeState, dict[str, HandshakeState]] = {
    _S.IDLE: {"connected": _S.AWAIT_CHALLENGE, **_LOST},
    _S.AWAIT_CHALLENGE: {"challenge": _S.AWAIT_READY, **_LOST},
    _S.AWAIT_READY: {"ready": _S.DONE, "ready, no pin": _S.AWAIT_PIN, **_LOST},
    _S.AWAIT_PIN: {"pinned": _S.DONE, **_LOST},
    _S.DONE: _LOST,
}
