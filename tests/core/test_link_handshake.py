"""The relay link's handshake machine: challenge, signed hello, signed ready, the key pin."""

from __future__ import annotations

import pytest
from nacl.signing import SigningKey

from crosstalk import crypto
from crosstalk.core.link.events import RelayKeySeen
from crosstalk.core.link.handshake import Authenticated, Handshake, HandshakeState
from crosstalk.errors import LocalProtocolError, RelayKeyMismatch, RemoteProtocolError
from crosstalk.wire import relay as w
from tests.core.link_helpers import (
    ME,
    NONCE,
    OTHER_RELAY_PUB,
    RELAY_PUB,
    URL,
    challenge,
    ready,
)


def handshake(pinned: bytes | None = RELAY_PUB) -> Handshake:
    h = Handshake(keys=ME, device="dev-1", url=URL, pinned_key=pinned)
    h.connected()
    return h


def state(h: Handshake) -> HandshakeState:
    """Read through a call so mypy does not pin the state between inputs."""
    return h.state


def test_the_challenge_is_answered_with_a_hello_signed_over_the_transcript() -> None:
    """hello carries our keys and device, signed over nonce, relay key, keys, device, version."""
    h = handshake()
    hello = h.frame_received(challenge())
    assert isinstance(hello, w.Hello)
    transcript = w.hello_transcript(NONCE, RELAY_PUB, ME.ed_pub, ME.x_pub, "dev-1",
                                    w.PROTOCOL_VERSION)
    crypto.verify(ME.ed_pub, transcript, hello.sig)
    assert (hello.device, hello.ed_pub, hello.x_pub) == ("dev-1", ME.ed_pub, ME.x_pub)
    assert state(h) is HandshakeState.AWAIT_READY


def test_a_verified_ready_with_a_pin_authenticates() -> None:
    """With the key pinned, ready ends the handshake at once."""
    h = handshake()
    h.frame_received(challenge())
    assert h.frame_received(ready()) == Authenticated(RELAY_PUB)
    assert state(h) is HandshakeState.DONE


def test_first_use_reports_the_key_and_waits_for_the_pin() -> None:
    """With no pin, ready yields RelayKeySeen; the durable pin then authenticates."""
    h = handshake(pinned=None)
    h.frame_received(challenge())
    assert h.frame_received(ready()) == RelayKeySeen(RELAY_PUB)
    assert state(h) is HandshakeState.AWAIT_PIN and h.relay_key is None
    assert h.key_pinned(RELAY_PUB) == Authenticated(RELAY_PUB)
    assert state(h) is HandshakeState.DONE and h.relay_key == RELAY_PUB


def test_a_pin_committed_after_its_connection_dropped_still_stands() -> None:
    """The pin is durable: kept for the next connection, whose challenge must match it."""
    h = handshake(pinned=None)
    h.frame_received(challenge())
    h.frame_received(ready())
    h.lost()
    assert h.key_pinned(RELAY_PUB) is None
    assert state(h) is HandshakeState.IDLE and h.relay_key == RELAY_PUB
    h.connected()
    with pytest.raises(RelayKeyMismatch):
        h.frame_received(challenge(OTHER_RELAY_PUB))


def test_pinning_a_second_different_key_is_our_bug() -> None:
    """key_pinned with a key other than the pinned one parks the machine in ERROR."""
    h = handshake()
    with pytest.raises(LocalProtocolError):
        h.key_pinned(OTHER_RELAY_PUB)
    assert state(h) is HandshakeState.ERROR


def test_another_key_at_a_pinned_url_is_refused_before_saying_anything() -> None:
    """A mismatched key raises RelayKeyMismatch (no hello) with words for the user."""
    h = handshake()
    with pytest.raises(RelayKeyMismatch, match="will not talk to it") as caught:
        h.frame_received(challenge(OTHER_RELAY_PUB))
    assert caught.value.code == "relay_key_mismatch"
    assert state(h) is HandshakeState.AWAIT_CHALLENGE


@pytest.mark.parametrize(
    "bad_ready",
    [ready(signer=SigningKey(b"\x05" * 32)), ready(keys=crypto.Keys(b"\x06" * 32, b"\x07" * 32))],
    ids=["forged-signature", "someone-else"],
)
def test_a_ready_that_does_not_verify_is_a_protocol_error(bad_ready: w.Ready) -> None:
    """A ready signed by another key, or naming another fingerprint, is refused."""
    h = handshake()
    h.frame_received(challenge())
    with pytest.raises(RemoteProtocolError):
        h.frame_received(bad_ready)


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (challenge(version=w.PROTOCOL_VERSION + 1), f"protocol {w.PROTOCOL_VERSION + 1}"),
        (w.Challenge(NONCE[:8], RELAY_PUB, w.PROTOCOL_VERSION), "wrong size"),
        (w.Challenge(NONCE, RELAY_PUB[:8], w.PROTOCOL_VERSION), "wrong size"),
        (ready(), "ready during the handshake"),
        (w.Error(None, "unauthenticated", "no"), "unauthenticated"),
        (w.Presence("f", True), "presence during the handshake"),
    ],
    ids=["version", "nonce-size", "key-size", "ready-first", "error", "push"],
)
def test_a_bad_first_frame_is_a_protocol_error(frame: w.RelayFrame, match: str) -> None:
    """Another version, wrong sizes, ready before challenge, an error or a push: refused."""
    h = handshake()
    with pytest.raises(RemoteProtocolError, match=match):
        h.frame_received(frame)


def test_a_second_challenge_is_a_protocol_error() -> None:
    """challenge twice in one handshake is the relay's fault."""
    h = handshake()
    h.frame_received(challenge())
    with pytest.raises(RemoteProtocolError, match="challenge during the handshake"):
        h.frame_received(challenge())


def test_frames_when_not_authenticating_are_our_bug() -> None:
    """A frame before connected, or after the handshake, parks the machine in ERROR."""
    idle = Handshake(keys=ME, device="dev-1", url=URL, pinned_key=RELAY_PUB)
    with pytest.raises(LocalProtocolError):
        idle.frame_received(challenge())
    assert state(idle) is HandshakeState.ERROR
    done = handshake()
    done.frame_received(challenge())
    done.frame_received(ready())
    with pytest.raises(LocalProtocolError):
        done.frame_received(challenge())


def test_connected_twice_is_our_bug() -> None:
    """connected while a handshake runs parks the machine in ERROR."""
    h = handshake()
    with pytest.raises(LocalProtocolError):
        h.connected()
    assert state(h) is HandshakeState.ERROR


def test_losing_the_connection_starts_over_from_any_state() -> None:
    """lost returns to IDLE from every state, forgetting the challenge."""
    for steps in range(3):
        h = handshake(pinned=None)
        both: list[w.RelayFrame] = [challenge(), ready()]
        frames = both[:steps]
        for frame in frames:
            h.frame_received(frame)
        h.lost()
        assert state(h) is HandshakeState.IDLE
        h.connected()
        assert isinstance(h.frame_received(challenge()), w.Hello)
