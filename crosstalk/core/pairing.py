"""The pairing machine: SPAKE2 over the words, key confirmation, then sealed offers. Sans-IO.

Theory of operation
-------------------
Two sides who share an invite code (slot + words) meet in the relay's pairing slot, a tiny
write-once mailbox: each side writes its messages at indices 0, 1, 2 and the relay pushes them to
the other side. Both sides run this same machine; only their role (inviter / joiner) differs, and
only in what their offers must contain.

    index 0  SPAKE2     our symmetric SPAKE2 message (33 bytes). The password is the words bound
                        to the slot and purpose; the SPAKE2 identity binds slot and purpose too.
    index 1  CONFIRM    a MAC of the transcript under *our* confirmation key (32 bytes).
    index 2  OFFER      our :class:`~crosstalk.wire.pairing.Offer`, sealed (XChaCha20-Poly1305)
                        under *our* offer key, the transcript as associated data.

States (``PairingState``): IDLE -start-> WAITING (sent index 0) -their index 0-> CONFIRMING
(key derived, sent index 1) -their MAC checks-> EXCHANGING (sent index 2) -their offer opens->
DONE. A MAC that does not check is WRONG_WORDS; any other bad input is ERROR. All three are
terminal. The transition table is at the bottom of the module.

Invariants:

* SPAKE2 gives different keys, not an error, when the words differ, so nothing is trusted
  until the other side's MAC checks: we send our offer only after that, and open theirs only
  after that (their index 2 waits in a buffer until index 1 has been verified).
* Each side confirms and seals with keys bound to its own SPAKE2 message, so nothing reflected
  back at its sender verifies or opens.
* We send our MAC as soon as we have the key, before checking theirs. So when the words differ
  *both* sides see a wrong MAC and end in WRONG_WORDS; neither has sent or opened an offer.
  The side that hits it raises :class:`~crosstalk.errors.WrongWords`; its shell must still send
  what :meth:`PairingMachine.data_to_send` holds, so the other side learns it too.
* Messages may arrive out of order or twice (the relay replays a slot after a reconnect):
  they are buffered by index and processed in order; an identical repeat is ignored, a different
  message at an index already seen is a protocol error.
* Everything after ``start`` is a deterministic function of the snapshot and the peer's messages
  (the offer nonce is in the snapshot), so a machine restored from :meth:`serialize` and fed the
  replayed messages sends byte-identical messages and emits the same events again.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

from crosstalk import crypto, crypto_pairing
from crosstalk.core.words import is_word
from crosstalk.errors import (
    DamagedState,
    LocalProtocolError,
    RemoteProtocolError,
    WrongWords,
)
from crosstalk.wire.pairing import (
    Offer,
    PairingSnapshot,
    Purpose,
    Role,
    decode_offer,
    decode_snapshot,
    encode_offer,
    encode_snapshot,
)

SPAKE, CONFIRM, OFFER = 0, 1, 2
MAX_OFFER_SIZE = 1024 * 1024
_SIZE_LIMITS = {
    SPAKE: crypto_pairing.SPAKE_MESSAGE_SIZE,
    CONFIRM: crypto.MAC_SIZE,
    OFFER: MAX_OFFER_SIZE,
}
WRONG_WORDS_MESSAGE = "the words did not match; nothing was adopted; start a new pairing"


class PairingState(enum.Enum):
    """Where a pairing is. DONE, WRONG_WORDS and ERROR are terminal."""

    IDLE = "idle"
    WAITING = "waiting"
    CONFIRMING = "confirming"
    EXCHANGING = "exchanging"
    DONE = "done"
    WRONG_WORDS = "wrong_words"
    ERROR = "error"


TERMINAL = frozenset({PairingState.DONE, PairingState.WRONG_WORDS, PairingState.ERROR})


@attrs.frozen
class Confirmed:
    """The other side proved it holds the same words: the pairing key is shared."""


@attrs.frozen
class OfferReceived:
    """The other side's offer opened and is well-formed for its role. Adopt it now."""

    offer: Offer


PairingEvent = Confirmed | OfferReceived


def offer_problem(offer: Offer, *, purpose: Purpose, sender: Role) -> str | None:
    """Why ``offer`` is not what a ``sender`` of a ``purpose`` pairing sends, or None if it is.

    For ``room`` the inviter grants the room of two; for ``link`` the inviter hands over the
    identity bundle. The joiner's offer carries neither.
    """
    wants_room = purpose is Purpose.ROOM and sender is Role.INVITER
    wants_bundle = purpose is Purpose.LINK and sender is Role.INVITER
    if (offer.room is not None) != wants_room:
        return "a room" if wants_room else "no room"
    if (offer.identity_bundle is not None) != wants_bundle:
        return "an identity bundle" if wants_bundle else "no identity bundle"
    return None


class PairingMachine:
    """One side of a pairing: feed it inputs, drain ``data_to_send`` and ``events_received``.

    Construct it once the slot is known, then call :meth:`start` (or use :meth:`restore`).
    """

    def __init__(self, *, purpose: Purpose, role: Role, slot: str) -> None:
        if not (len(slot) == 4 and slot.isascii() and slot.isdigit()):
            raise LocalProtocolError("a pairing slot is 4 digits")
        self.purpose = purpose
        self.role = role
        self.slot = slot
        self._state = PairingState.IDLE
        self._snapshot: PairingSnapshot | None = None
        self._received: dict[int, bytes] = {}
        self._next_index = SPAKE
        self._transcript = b""
        self._keys: crypto_pairing.PairingKeys | None = None
        self._outbox: list[tuple[int, bytes]] = []
        self._events: list[PairingEvent] = []

    @property
    def state(self) -> PairingState:
        """The current state."""
        return self._state

    # --- inputs -------------------------------------------------------------------------------

    def start(
        self, *, words: Sequence[str], offer: Offer, offer_nonce: bytes, entropy: bytes
    ) -> None:
        """Begin: queue our SPAKE2 message (index 0).

        Args:
            words: the code's words (4 for ``room``, 6 for ``link``), lowercase.
            offer: what we will tell the other side once the words are confirmed.
            offer_nonce: 24 random bytes to seal the offer with.
            entropy: 64 random bytes for our SPAKE2 scalar.

        Raises:
            LocalProtocolError: called twice, or with malformed arguments.
        """
        self._check_start(words, offer, offer_nonce)
        password = crypto_pairing.pairing_password(self.purpose.value, self.slot, words)
        identity = crypto_pairing.pairing_identity(self.purpose.value, self.slot)
        spake_state, message = crypto_pairing.spake_start(password, identity, entropy)
        self._snapshot = PairingSnapshot(
            purpose=self.purpose,
            role=self.role,
            slot=self.slot,
            spake_state=spake_state,
            my_message=message,
            offer=offer,
            offer_nonce=offer_nonce,
        )
        self._move("start")
        self._outbox.append((SPAKE, message))

    def message_received(self, index: int, data: bytes) -> None:
        """The other side's message ``index`` arrived through the slot.

        Raises:
            WrongWords: the other side's confirmation does not match (terminal).
            RemoteProtocolError: the other side sent something malformed (state becomes ERROR).
            LocalProtocolError: called before ``start`` or after the pairing ended.
        """
        if self._state is PairingState.IDLE:
            raise LocalProtocolError("start the pairing before feeding it messages")
        if self._received.get(index) == data:
            return  # a replay after a reconnect: already handled
        if self._state in TERMINAL:
            raise LocalProtocolError(f"the pairing has ended ({self._state.value})")
        try:
            self._store(index, data)
            self._advance()
        except RemoteProtocolError:  # WrongWords is not one: it has its own terminal state
            self._state = PairingState.ERROR
            raise

    # --- outputs ------------------------------------------------------------------------------

    def data_to_send(self) -> list[tuple[int, bytes]]:
        """Drain the ``(index, bytes)`` messages to write to the slot, in order."""
        out, self._outbox = self._outbox, []
        return out

    def events_received(self) -> list[PairingEvent]:
        """Drain what happened: :class:`Confirmed`, then :class:`OfferReceived`."""
        out, self._events = self._events, []
        return out

    # --- persistence --------------------------------------------------------------------------

    def serialize(self) -> bytes:
        """A snapshot to resume from after a restart. It holds secrets: store it like a key."""
        if self._snapshot is None:
            raise LocalProtocolError("nothing to serialise before the pairing starts")
        return encode_snapshot(self._snapshot)

    @classmethod
    def restore(cls, blob: bytes) -> PairingMachine:
        """Rebuild a machine from :meth:`serialize`, in WAITING with index 0 queued again.

        Feed it every message the relay replays from the slot. Its outputs repeat what the
        previous instance sent, byte for byte, so an "already written" answer from the relay
        for an identical message is harmless.

        Raises:
            DamagedState: ``blob`` is not a snapshot.
        """
        try:
            snapshot = decode_snapshot(blob)
        except RemoteProtocolError:
            raise DamagedState("the saved pairing does not parse; start a new pairing") from None
        machine = cls(purpose=snapshot.purpose, role=snapshot.role, slot=snapshot.slot)
        machine._snapshot = snapshot
        machine._move("start")
        machine._outbox.append((SPAKE, snapshot.my_message))
        return machine

    # --- internals ----------------------------------------------------------------------------

    def _check_start(self, words: Sequence[str], offer: Offer, offer_nonce: bytes) -> None:
        if self._state is not PairingState.IDLE:
            raise LocalProtocolError("a pairing starts once")
        if len(words) != self.purpose.word_count or not all(is_word(w) for w in words):
            raise LocalProtocolError(f"a {self.purpose.value} pairing needs words from the list")
        if len(offer_nonce) != crypto.NONCE_SIZE:
            raise LocalProtocolError(f"the offer nonce is {crypto.NONCE_SIZE} bytes")
        problem = offer_problem(offer, purpose=self.purpose, sender=self.role)
        if problem is not None:
            raise LocalProtocolError(f"our {self.role.value} offer must carry {problem}")

    def _store(self, index: int, data: bytes) -> None:
        limit = _SIZE_LIMITS.get(index)
        if limit is None:
            raise RemoteProtocolError(f"the other side sent pairing message {index}; there is none")
        if index in self._received:
            raise RemoteProtocolError("the other side sent two different messages for one step")
        if len(data) > limit:
            raise RemoteProtocolError(f"pairing message {index} is too large")
        self._received[index] = data

    def _advance(self) -> None:
        handlers = {SPAKE: self._on_spake, CONFIRM: self._on_confirm, OFFER: self._on_offer}
        while self._next_index in self._received and self._state not in TERMINAL:
            index = self._next_index
            self._next_index += 1
            handlers[index](self._received[index])

    def _on_spake(self, their_message: bytes) -> None:
        snapshot = self._require_snapshot()
        key = crypto_pairing.spake_finish(snapshot.spake_state, their_message)
        self._transcript = crypto_pairing.pairing_transcript(
            self.purpose.value, self.slot, snapshot.my_message, their_message
        )
        self._keys = crypto_pairing.derive_pairing_keys(
            key, self._transcript, snapshot.my_message, their_message
        )
        self._move("key_agreed")
        self._outbox.append(
            (CONFIRM, crypto_pairing.confirmation_mac(self._keys.my_confirm, self._transcript))
        )

    def _on_confirm(self, their_mac: bytes) -> None:
        keys, snapshot = self._require_keys(), self._require_snapshot()
        if len(their_mac) != crypto.MAC_SIZE:
            raise RemoteProtocolError("the other side's confirmation is malformed")
        if not crypto_pairing.confirmation_matches(keys.their_confirm, self._transcript, their_mac):
            self._move("mac_mismatched")
            raise WrongWords(WRONG_WORDS_MESSAGE)
        self._move("mac_matched")
        self._events.append(Confirmed())
        sealed = crypto.aead_seal(
            keys.my_offer,
            encode_offer(snapshot.offer),
            nonce=snapshot.offer_nonce,
            ad=self._transcript,
        )
        self._outbox.append((OFFER, sealed))

    def _on_offer(self, sealed: bytes) -> None:
        keys, snapshot = self._require_keys(), self._require_snapshot()
        offer = decode_offer(crypto.aead_open(keys.their_offer, sealed, ad=self._transcript))
        problem = offer_problem(offer, purpose=self.purpose, sender=self.role.other)
        if problem is not None:
            raise RemoteProtocolError(f"the other side's offer must carry {problem}")
        if self.purpose is Purpose.ROOM and offer.ed_pub == snapshot.offer.ed_pub:
            raise RemoteProtocolError("the other side offered your own identity back")
        self._move("offer_opened")
        self._events.append(OfferReceived(offer))

    def _require_snapshot(self) -> PairingSnapshot:
        if self._snapshot is None:  # unreachable once started; keeps the types honest
            raise LocalProtocolError("the pairing has not started")
        return self._snapshot

    def _require_keys(self) -> crypto_pairing.PairingKeys:
        if self._keys is None:  # unreachable: index 1 and 2 are handled after index 0
            raise LocalProtocolError("no pairing key yet")
        return self._keys

    def _move(self, happened: str) -> None:
        next_state = _TRANSITIONS.get(self._state, {}).get(happened)
        if next_state is None:
            raise LocalProtocolError(f"pairing cannot {happened} while {self._state.value}")
        self._state = next_state


# What may happen in each state, and where it leads. Anything else raises; terminal states have
# no way out. (h11 ``_state.py`` keeps its table the same way.)
_TRANSITIONS: dict[PairingState, dict[str, PairingState]] = {
    PairingState.IDLE: {"start": PairingState.WAITING},
    PairingState.WAITING: {"key_agreed": PairingState.CONFIRMING},
    PairingState.CONFIRMING: {
        "mac_matched": PairingState.EXCHANGING,
        "mac_mismatched": PairingState.WRONG_WORDS,
    },
    PairingState.EXCHANGING: {"offer_opened": PairingState.DONE},
}
