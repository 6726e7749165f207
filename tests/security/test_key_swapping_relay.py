"""A relay that swaps the keys it forwards during pairing (issue 20, acceptance).

The relay here is the real relay core (:class:`relay.core.RelayCore`, its slots and pairing desk)
behind a test-only wrapper that plays a man in the middle: it keeps every part the two sides
write into the slot from reaching the other side, runs a pairing machine of its own against each
(the real :class:`~crosstalk.core.pairing.PairingMachine`, with its own identity key, which it
also puts in place of each side's key in ``slot_joined``), and forwards its own messages instead.
Each side runs the real :class:`~crosstalk.actors.pairing.PairingActor`.

* Without the words (the relay never sees them), the swap is caught by key confirmation: both
  sides end ``wrong_words``, nobody adopts a key or a fingerprint, and no sealed offer (so no
  room key) ever reaches the relay; its own machines open nothing.
* Even a relay that somehow has the words (it overheard the code) gets only this far: both sides
  pair, but each side's ``them`` is the relay's fingerprint, which is not the other side's
  ``you``. Comparing them aloud, as ``room new``/``room join`` ask, catches it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from crosstalk import crypto
from crosstalk.actors.pairing import Paired, PairingActor, PairingFailed, PairingOutcome
from crosstalk.core.link import relay_error
from crosstalk.core.pairing import OFFER, OfferReceived, PairingMachine, PairingState
from crosstalk.core.words import WORDS as WORD_LIST
from crosstalk.wire import relay as w
from crosstalk.wire.pairing import Offer, Purpose, Role, RoomGrant
from relay.effects import Close, Effect, Send
from tests.relay.harness import Ident, World

WORDS = ("acorn", "apple", "bat", "cow")
GUESS = tuple(w for w in WORD_LIST if w not in WORDS)[:4]
ANA = crypto.Keys(b"\x11" * 32, b"\x12" * 32)
BEN = crypto.Keys(b"\x13" * 32, b"\x14" * 32)
MALLORY = crypto.Keys(b"\x15" * 32, b"\x16" * 32)
ANA_ROOM = RoomGrant(room_id="r-ana-ben", key=b"\x42" * 32)


def _offer(keys: crypto.Keys, label: str, room: RoomGrant | None = None) -> Offer:
    return Offer(
        label=label,
        machine=f"{label}-laptop",
        agent=False,
        ed_pub=keys.ed_pub,
        x_pub=keys.x_pub,
        relay_url="ws://127.0.0.1:8787/ws",
        relay_key=b"\x09" * 32,
        room=room,
    )


class SwappingWorld(World):
    """The real relay core, whose slot forwarding a man in the middle rewrites."""

    def __init__(self, words: tuple[str, ...], *, swap: bool = True) -> None:
        super().__init__()
        self.words = words
        self.swap = swap
        self.owner_conn = 0
        self.joiner_conn = 0
        self.slot = ""
        #: The relay's machine facing the inviter (it plays the joiner) and the joiner.
        self.to_owner: PairingMachine | None = None
        self.to_joiner: PairingMachine | None = None
        #: Every part the two real sides wrote: all the relay ever saw of the pairing.
        self.seen: list[tuple[str, int, bytes]] = []
        #: Everything the relay core stored.
        self.stored: list[Effect] = []

    def start(self, slot: str, owner_conn: int, joiner_conn: int) -> None:
        self.slot, self.owner_conn, self.joiner_conn = slot, owner_conn, joiner_conn
        if not self.swap:
            return
        self.to_owner = self._machine(Role.JOINER, _offer(MALLORY, "mallory"), seed=5)
        room = RoomGrant(room_id="r-mallory", key=b"\x66" * 32)
        self.to_joiner = self._machine(Role.INVITER, _offer(MALLORY, "mallory", room), seed=6)

    def _machine(self, role: Role, offer: Offer, seed: int) -> PairingMachine:
        machine = PairingMachine(purpose=Purpose.ROOM, role=role, slot=self.slot)
        machine.start(
            words=self.words, offer=offer, offer_nonce=bytes([seed]) * 24,
            entropy=bytes([seed]) * 64,
        )
        return machine

    def apply(self, effects: list[Effect]) -> None:
        self.stored += [e for e in effects if not isinstance(e, Send | Close)]
        super().apply([self._rewrite(e) for e in effects if not self._swallow(e)])
        self._forward_own()

    def _swallow(self, effect: Effect) -> bool:
        """A real side's part on its way to the other side: the relay keeps it for itself."""
        if not (self.swap and isinstance(effect, Send) and isinstance(effect.frame, w.SlotMsg)):
            return False
        msg = effect.frame
        self.seen.append((msg.from_side, msg.index, msg.data))
        facing = self.to_owner if msg.from_side == "owner" else self.to_joiner
        assert facing is not None
        try:
            facing.message_received(msg.index, msg.data)
        except Exception:
            pass
        return True

    def _rewrite(self, effect: Effect) -> Effect:
        """``slot_joined`` names the relay's key instead of the other side's."""
        if self.swap and isinstance(effect, Send) and isinstance(effect.frame, w.SlotJoined):
            frame = attrs.evolve(
                effect.frame,
                fingerprint=MALLORY.fingerprint,
                ed_pub=MALLORY.ed_pub,
                x_pub=MALLORY.x_pub,
            )
            return attrs.evolve(effect, frame=frame)
        return effect

    def _forward_own(self) -> None:
        for machine, conn, side in (
            (self.to_owner, self.owner_conn, "joiner"),
            (self.to_joiner, self.joiner_conn, "owner"),
        ):
            if machine is None:
                continue
            for index, data in machine.data_to_send():
                self.inbox[conn].append(w.SlotMsg(self.slot, side, index, data))  # type: ignore[arg-type]

    def opened_offers(self) -> list[Offer]:
        """Offers the relay's own machines managed to open."""
        found: list[Offer] = []
        for machine in (self.to_owner, self.to_joiner):
            if machine is None:
                continue
            found += [e.offer for e in machine.events_received() if isinstance(e, OfferReceived)]
        return found


class FakeClient:
    """What a pairing actor needs of the relay link, straight onto the world's core."""

    def __init__(self, world: SwappingWorld, conn: int, pump: Callable[[], None]) -> None:
        self.world = world
        self.conn = conn
        self.pump = pump

    async def request(self, frame: object, expect: type, *, within: float | None = None) -> object:
        await trio.lowlevel.checkpoint()
        req = self.world.req()
        self.world.apply(self.world.core.frame_received(
            self.conn, w.encode_frame(attrs.evolve(frame, req=req)), 0.0  # type: ignore[misc]
        ))
        answer = None
        rest = []
        for got in self.world.take(self.conn):
            if getattr(got, "req", None) == req:
                answer = got
            else:
                rest.append(got)
        self.world.inbox[self.conn][:0] = rest
        self.pump()
        if isinstance(answer, w.Error):
            raise relay_error(answer)
        assert isinstance(answer, expect), (frame, answer)
        return answer


    async def request_paid(self, make: Callable[[bytes], object], expect: type, *,
                           slot: str = "") -> object:
        """The world's relay asks no proof of work (World's default): no proof is sent."""
        return await self.request(make(b""), expect)


class Ctx:
    def __init__(self, receive: trio.MemoryReceiveChannel[object]) -> None:
        self._receive = receive

    async def receive(self) -> object:
        return await self._receive.receive()


async def _pair_through(world: SwappingWorld) -> tuple[PairingOutcome, PairingOutcome]:
    ana_conn = world.login(Ident(0x11))  # ANA's identity key
    ben_conn = world.login(Ident(0x13))  # BEN's
    [slot] = [f for f in world.send(ana_conn, w.SlotOpen(world.req())) if isinstance(f, w.Slot)]
    world.start(slot.slot, ana_conn, ben_conn)
    pushes = {conn: trio.open_memory_channel[object](1000) for conn in (ana_conn, ben_conn)}

    def pump() -> None:
        for conn, (send, _) in pushes.items():
            for frame in world.take(conn):
                send.send_nowait(frame)

    outcomes_send, outcomes = trio.open_memory_channel[PairingOutcome](2)
    deadline = trio.current_time() + 30
    actors = [
        (PairingActor(
            relay=FakeClient(world, ana_conn, pump),  # type: ignore[arg-type]
            role=Role.INVITER, purpose=Purpose.ROOM, slot=slot.slot, words=WORDS,
            offer=_offer(ANA, "ana", ANA_ROOM), outcome=outcomes_send, deadline=deadline,
        ), ana_conn),
        (PairingActor(
            relay=FakeClient(world, ben_conn, pump),  # type: ignore[arg-type]
            role=Role.JOINER, purpose=Purpose.ROOM, slot=slot.slot, words=WORDS,
            offer=_offer(BEN, "ben"), outcome=outcomes_send, deadline=deadline,
        ), ben_conn),
    ]
    got: dict[int, PairingOutcome] = {}
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            for actor, conn in actors:
                nursery.start_soon(actor.run, Ctx(pushes[conn][1]))  # type: ignore[arg-type]
            for _ in range(2):
                outcome = await outcomes.receive()
                got[len(got)] = outcome
            nursery.cancel_scope.cancel()
    # Which outcome is whose: each actor reports once; match by the key it adopted, if any.
    ana_out, ben_out = _whose(got[0], got[1])
    return ana_out, ben_out


def _whose(a: PairingOutcome, b: PairingOutcome) -> tuple[PairingOutcome, PairingOutcome]:
    """(inviter's, joiner's): the inviter adopts a joiner's offer (no room), the joiner the
    inviter's (with a room); failures are symmetric, so their order does not matter."""
    if isinstance(a, Paired) and a.offer.room is not None:
        return b, a
    return a, b


async def test_a_relay_without_the_words_that_swaps_keys_is_caught_and_learns_nothing() -> None:
    """Both sides fail with wrong_words, adopt no fingerprint, and no offer or room key reaches
    the relay; its own machines open nothing."""
    world = SwappingWorld(GUESS)
    ana_out, ben_out = await _pair_through(world)
    for outcome in (ana_out, ben_out):
        assert isinstance(outcome, PairingFailed), outcome
        assert outcome.error.code == "wrong_words"
    assert not [part for part in world.seen if part[1] == OFFER], "a sealed offer left a side"
    assert all(ANA_ROOM.key not in data for _, _, data in world.seen)
    assert all(ANA_ROOM.key not in repr(write).encode() for write in world.stored)
    assert world.opened_offers() == []
    assert world.to_owner is not None and world.to_owner.state is PairingState.WRONG_WORDS


async def test_an_honest_relay_pairs_with_fingerprints_that_match() -> None:
    """The control: the same harness without the swap pairs, and each `them` is the other's
    `you`."""
    ana_out, ben_out = await _pair_through(SwappingWorld(WORDS, swap=False))
    assert isinstance(ana_out, Paired) and isinstance(ben_out, Paired), (ana_out, ben_out)
    assert crypto.fingerprint(ana_out.offer.ed_pub) == BEN.fingerprint
    assert crypto.fingerprint(ben_out.offer.ed_pub) == ANA.fingerprint


async def test_a_relay_with_the_words_that_swaps_keys_shows_fingerprints_that_differ() -> None:
    """Both sides pair, but each side's `them` is the relay's key: it matches neither side's
    `you`, so reading the fingerprints aloud catches the swap."""
    world = SwappingWorld(WORDS)
    ana_out, ben_out = await _pair_through(world)
    assert isinstance(ana_out, Paired) and isinstance(ben_out, Paired), (ana_out, ben_out)
    ana_them = crypto.fingerprint(ana_out.offer.ed_pub)
    ben_them = crypto.fingerprint(ben_out.offer.ed_pub)
    assert ana_them != BEN.fingerprint
    assert ben_them != ANA.fingerprint
    assert {ana_them, ben_them} == {MALLORY.fingerprint}
    # ben's room is the relay's, not ana's: what ana sealed for ben never reached him
    assert ben_out.offer.room is not None and ben_out.offer.room.key != ANA_ROOM.key
