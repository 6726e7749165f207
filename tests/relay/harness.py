"""A fake world for the relay core: deterministic randomness, in-memory storage, a frame log.

It plays the shell's part exactly: every write of a batch is committed before the batch's sends
are recorded, and it checks that no ``Send`` in a batch precedes a write it depends on.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

import attrs
from nacl.signing import SigningKey

from crosstalk.crypto import fingerprint
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState, Statement, transcript
from relay.core import RelayCore
from relay.effects import Close, Effect, Send
from relay.limits import RelayConfig
from relay.storage import MemoryStorage, Write


class CountingDraw:
    """Deterministic "random" bytes: a hash chain."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, size: int) -> bytes:
        out = b""
        while len(out) < size:
            self.n += 1
            out += hashlib.sha256(self.n.to_bytes(8, "big")).digest()
        return out[:size]


@attrs.frozen
class Ident:
    """A client identity: an Ed25519 key (from a seed byte) and an X25519 public key."""

    seed: int

    @property
    def key(self) -> SigningKey:
        return SigningKey(bytes([self.seed]) * 32)

    @property
    def ed_pub(self) -> bytes:
        return bytes(self.key.verify_key)

    @property
    def x_pub(self) -> bytes:
        return bytes(self.key.to_curve25519_private_key().public_key)

    @property
    def fp(self) -> str:
        return fingerprint(self.ed_pub)

    def hello(self, challenge: w.Challenge, device: str) -> w.Hello:
        transcript = w.hello_transcript(challenge.nonce, challenge.relay_key, self.ed_pub,
                                        self.x_pub, device, w.PROTOCOL_VERSION)
        return w.Hello(self.ed_pub, self.x_pub, device, w.PROTOCOL_VERSION,
                       self.key.sign(transcript).signature)

    def vouch(self, room: str, who: Ident) -> bytes:
        """This identity's signature on ``who``'s roster entry in ``room``."""
        return self.key.sign(w.member_transcript(room, who.ed_pub, who.x_pub)).signature

    def statement(self, history: ChainState, kind: str, subject: Ident | str | None = None
                  ) -> Statement:
        """This identity's signed statement of a change, on ``history``'s newest head."""
        who = subject if subject is not None else self
        fp = who if isinstance(who, str) else who.fp
        carries = kind in ("create", "invite") and not isinstance(who, str)
        after, link = history.head()
        unsigned = Statement(
            history.room, kind, self.fp, fp, who.ed_pub if carries else b"",  # type: ignore[union-attr]
            who.x_pub if carries else b"", after, link,  # type: ignore[union-attr]
        )
        return attrs.evolve(unsigned, sig=self.key.sign(transcript(unsigned)).signature)


@attrs.define
class WallClock:
    """A settable wall clock for storage backends (what ``time.time`` is in production)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@attrs.frozen
class _Keyed:
    """Someone known only by their keys (an invitee named in an ``add``)."""

    ed_pub: bytes
    x_pub: bytes

    @property
    def fp(self) -> str:
        return fingerprint(self.ed_pub)


ALICE, BOB, CAROL, MALLORY = Ident(1), Ident(2), Ident(3), Ident(4)
RELAY_KEY = SigningKey(b"\x09" * 32)


class World:
    """One relay core and everything it said, per connection."""

    def __init__(self, config: RelayConfig | None = None, storage: MemoryStorage | None = None,
                 *, work: bool = False):
        self.storage = storage or MemoryStorage()
        # Tests of other rules do not pay the strangers' proof of work (test_core_work does).
        config = config or RelayConfig()
        self.config = config if work else attrs.evolve(config, slot_work_bits=0)
        self.core = RelayCore(
            signing_key=RELAY_KEY, draw=CountingDraw(), config=self.config,
            snapshot=self.storage.load(),
        )
        self.inbox: dict[int, list[w.RelayFrame]] = defaultdict(list)
        self.closed: list[int] = []
        self.effects: list[Effect] = []
        self._next = 0
        self._req = 0
        self.idents: dict[int, Ident] = {}  # who logged in on each connection

    def apply(self, effects: list[Effect]) -> None:
        self.effects = effects
        writes = [e for e in effects if not isinstance(e, Send | Close)]
        self.storage.commit(writes)
        for e in effects:
            if isinstance(e, Send):
                # Frames survive an encode/decode round trip: what the core says is on the wire.
                text = w.encode_frame(e.frame)
                self.inbox[e.conn].append(w.decode_relay_frame(text))
            elif isinstance(e, Close):
                self.closed.append(e.conn)

    def open(self, source: str = "10.0.0.1", now: float = 0.0) -> int:
        self._next += 1
        self.apply(self.core.connection_opened(self._next, source, now))
        return self._next

    def raw(self, conn: int, text: str | bytes, now: float = 0.0) -> list[w.RelayFrame]:
        self.apply(self.core.frame_received(conn, text, now))
        return self.take(conn)

    def send(self, conn: int, frame: w.ClientFrame, now: float = 0.0) -> list[w.RelayFrame]:
        """Send one frame; return what this connection got back (and drain it). A membership
        request without a statement gets the one an honest client would sign, on the relay's
        newest head (tests of the statements themselves pass their own)."""
        return self.raw(conn, w.encode_frame(self.signed(conn, frame)), now)

    def history(self, room: str) -> ChainState:
        state = self.core._rooms.rooms.get(room)
        return state.history if state is not None else ChainState(room)

    def signed(self, conn: int, frame: w.ClientFrame) -> w.ClientFrame:
        who = self.idents.get(conn)
        if who is None or getattr(frame, "stmt", "n/a") is not None:
            return frame
        history = self.history(frame.room)  # type: ignore[union-attr]
        subject: Ident | str | None = None
        if isinstance(frame, w.Create):
            kind = "create"
        elif isinstance(frame, w.Add):
            kind, subject = "invite", _Keyed(frame.ed_pub, frame.x_pub)  # type: ignore[assignment]
        elif isinstance(frame, w.Remove):
            kind, subject = "remove", frame.fingerprint
        else:
            kind = {w.Accept: "accept", w.Decline: "decline", w.Leave: "leave"}[type(frame)]
        return attrs.evolve(frame, stmt=who.statement(history, kind, subject))  # type: ignore[misc]

    def take(self, conn: int) -> list[w.RelayFrame]:
        got = self.inbox.pop(conn, [])
        return got

    def login(self, who: Ident, device: str = "dev-1", now: float = 0.0,
              source: str = "10.0.0.1", resume: bool = True) -> int:
        conn = self.open(source, now)
        [challenge] = self.take(conn)
        assert isinstance(challenge, w.Challenge)
        got = self.send(conn, who.hello(challenge, device), now)
        assert isinstance(got[0], w.Ready), got
        self.idents[conn] = who
        if resume:
            assert isinstance(self.send(conn, w.Resume(self.req(), {}), now)[-1], w.Resumed)
        return conn

    def close(self, conn: int, now: float = 0.0) -> None:
        self.apply(self.core.connection_closed(conn, now))

    def tick(self, now: float) -> None:
        self.apply(self.core.tick(now))

    def req(self) -> int:
        self._req += 1
        return self._req

    def ok(self, conn: int, frame: w.ClientFrame, now: float = 0.0) -> list[w.RelayFrame]:
        """Send a request that must succeed; return everything else this connection got."""
        got = self.send(conn, frame, now)
        errors = [f for f in got if isinstance(f, w.Error)]
        assert not errors, errors
        return got

    def error(self, conn: int, frame: w.ClientFrame | str, now: float = 0.0) -> str:
        """Send something that must fail; return its error code."""
        got = self.raw(conn, frame, now) if isinstance(frame, str) else self.send(conn, frame, now)
        errors = [f for f in got if isinstance(f, w.Error)]
        assert len(errors) == 1, got
        return errors[0].code

    def room_of(self, creator_conn: int, creator: Ident, room: str, *others: tuple[int, Ident]
                ) -> None:
        """Create ``room`` and bring ``others`` in; the creator must already share a room or
        pairing grant with each (tests set that up), or they are added through a first room."""
        self.ok(creator_conn, w.Create(self.req(), room, creator.vouch(room, creator)))
        for conn, who in others:
            self.ok(creator_conn, w.Add(self.req(), room, who.ed_pub, who.x_pub,
                                        creator.vouch(room, who)))
            self.ok(conn, w.Accept(self.req(), room))

    def pair(self, a_conn: int, b_conn: int) -> str:
        """Run a pairing slot between two connections (grants one add between them)."""
        [slot] = self.ok(a_conn, w.SlotOpen(self.req()))
        assert isinstance(slot, w.Slot)
        self.ok(b_conn, w.SlotJoin(self.req(), slot.slot))
        self.take(a_conn)
        return slot.slot

    def writes(self) -> list[Write]:
        return [e for e in self.effects if not isinstance(e, Send | Close)]


def frames_of(frames: list[w.RelayFrame], cls: type) -> list[w.RelayFrame]:
    return [f for f in frames if isinstance(f, cls)]
