"""A relay connection as the core sees it, the core's statistics, and the signature checks its
handshake and roster changes make (refusing with the code the client is told)."""

from __future__ import annotations

import enum

import attrs
from nacl.exceptions import CryptoError
from nacl.signing import VerifyKey

from crosstalk.wire import relay as w
from relay.rooms import refuse
from relay.slots import Peer

MISBEHAVIOUR = frozenset({"bad_frame", "unauthenticated", "version"})


class ConnState(enum.Enum):
    AWAIT_HELLO = "await_hello"
    READY = "ready"
    CLOSING = "closing"


@attrs.define
class Conn:
    id: int
    source: str
    nonce: bytes
    state: ConnState = ConnState.AWAIT_HELLO
    peer: Peer | None = None
    device: str = ""
    bad: int = 0
    live: bool = False
    opened_at: float = 0.0
    work_seed: bytes | None = None  # the proof-of-work seed last handed out (relay.work)
    work_paid_by: object = None  # the decoded frame that spent it (decided again: still paid)
    # Rooms whose resume replay is under way: room -> seq of the last op replayed (relay.replay).
    replay: dict[str, int] = attrs.Factory(dict)

    @property
    def fp(self) -> str:
        assert self.peer is not None, "only READY connections have an identity"
        return self.peer.fingerprint


@attrs.frozen
class RelayStats:
    """A snapshot of the relay's size and traffic, for /health and /metrics."""

    connections: int
    authenticated: int
    identities: int
    rooms: int
    held_ops: int
    held_bytes: int
    slots: int
    ops_in: int
    ops_out: int
    errors: dict[str, int]
    shed: int = 0  # connections closed for a limit (relay.core._admit, relay.crowd)


def verify_sig(key: bytes, message: bytes, sig: bytes, code: str, sentence: str) -> None:
    """Refuse with ``code`` unless ``sig`` is ``key``'s signature of ``message``."""
    try:
        VerifyKey(key).verify(message, sig)
    except (CryptoError, ValueError, TypeError):
        raise refuse(code, sentence) from None


def verify_member(signer: bytes, room: str, ed_pub: bytes, x_pub: bytes, sig: bytes) -> None:
    """Refuse (``forbidden``) a roster entry ``signer`` did not sign for ``room``."""
    transcript = w.member_transcript(room, ed_pub, x_pub)
    verify_sig(signer, transcript, sig, "forbidden", "the roster entry's signature does not verify")
