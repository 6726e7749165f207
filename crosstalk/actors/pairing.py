"""The pairing actor: one per ``room new`` / ``room join`` / ``link`` in progress.

It drives a :class:`~crosstalk.core.pairing.PairingMachine` through the relay's pairing slot.
Its inbox receives the slot's pushes (``slot_joined``, ``slot_msg``, ``slot_closed``) and
``Reattach`` whenever the relay link reconnects; it reports one :data:`PairingOutcome` on its
``outcome`` channel and returns.

Restarts: the machine's snapshot (taken right after ``start``) stays in the actor object, so a
restarted instance restores it, re-attaches to the slot (the relay replays the other side's
messages) and re-sends identical bytes; the relay's "already written" answer to a re-send is
expected. A dropped relay connection is the same story: ``Reattach`` after the link is back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import nacl.utils
import trio

from crosstalk import sim_hooks
from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_client import RelayClient
from crosstalk.core.pairing import OfferReceived, PairingMachine
from crosstalk.errors import (
    CrosstalkError,
    RemoteProtocolError,
    SlotExpired,
    SlotNotFound,
    WrongWords,
)
from crosstalk.wire import relay as w
from crosstalk.wire.pairing import Offer, Purpose, Role

log = logging.getLogger(__name__)

# Relay refusals that end a pairing for good (anything else is retried by a restart).
FINAL_SLOT_ERRORS = frozenset({"slot_not_found", "slot_expired", "slot_taken", "rate_limited",
                               "work_required"})
OFFER_NONCE_SIZE = 24
SPAKE_ENTROPY_SIZE = 64


@attrs.frozen
class Reattach:
    """The relay link reconnected: attach to the slot again so its pushes reach us."""


@attrs.frozen
class Paired:
    """The words matched and the other side's offer opened."""

    offer: Offer
    # The identity the relay authenticated at the other end of the slot.
    peer_ed_pub: bytes


@attrs.frozen
class PairingFailed:
    error: CrosstalkError


PairingOutcome = Paired | PairingFailed
PairingInput = w.SlotJoined | w.SlotMsg | w.SlotClosed | Reattach


class PairingActor:
    """Runs one pairing to its end, then returns (the actor stops; it is never restarted).

    Args:
        relay: the link's request handle.
        role, purpose, slot, words: which side of which code we are.
        offer: what we tell the other side once the words are confirmed.
        outcome: hears exactly one :data:`PairingOutcome` (buffer >= 1).
        deadline: ``trio.current_time()`` at which the slot expires.
    """

    def __init__(
        self,
        *,
        relay: RelayClient,
        role: Role,
        purpose: Purpose,
        slot: str,
        words: tuple[str, ...],
        offer: Offer,
        outcome: trio.MemorySendChannel[PairingOutcome],
        deadline: float,
        randomness: Callable[[int], bytes] = nacl.utils.random,
    ) -> None:
        self._relay = relay
        self._role = role
        self._purpose = purpose
        self._slot = slot
        self._words = words
        self._offer = offer
        self._outcome = outcome
        self._deadline = deadline
        # The relay-authenticated key at the other end: from slot_join's reply (joiner) or
        # the slot_joined push (inviter). The offer must carry the same key.
        self._peer_ed_pub: bytes | None = None
        self._random = randomness
        self._snapshot: bytes | None = None
        self._reported = False

    @property
    def _side(self) -> w.Side:
        return "owner" if self._role is Role.INVITER else "joiner"

    async def run(
        self,
        ctx: ActorContext[PairingInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        machine = self._machine()
        if self._snapshot is None:
            if self._role is Role.JOINER and not await self._join():
                task_status.started()
                return
            machine.start(
                words=self._words,
                offer=self._offer,
                offer_nonce=self._random(OFFER_NONCE_SIZE),
                entropy=self._random(SPAKE_ENTROPY_SIZE),
            )
            self._snapshot = machine.serialize()
        else:
            sim_hooks.probe("pairing.restarted")  # restored from the snapshot: same bytes again
            await self._attach()
        task_status.started()
        with trio.move_on_at(self._deadline):
            try:
                await self._flush(machine)
                await self._exchange(ctx, machine)
            except CrosstalkError as exc:
                if exc.code not in FINAL_SLOT_ERRORS:
                    raise  # e.g. the relay is unreachable: restart, re-attach, carry on
                self._report(PairingFailed(exc))
            return
        self._report(
            PairingFailed(
                SlotExpired(
                    "The pairing code expired before the other side joined; start a new one."
                )
            )
        )

    def _machine(self) -> PairingMachine:
        if self._snapshot is not None:
            return PairingMachine.restore(self._snapshot)
        return PairingMachine(purpose=self._purpose, role=self._role, slot=self._slot)

    async def _exchange(self, ctx: ActorContext[PairingInput], machine: PairingMachine) -> None:
        while True:
            push = await ctx.receive()
            if isinstance(push, Reattach):
                sim_hooks.probe("pairing.reattached")  # the relay link came back mid-exchange
                await self._attach()
                await self._flush(machine)
            elif isinstance(push, w.SlotJoined):
                self._peer_ed_pub = push.ed_pub
            elif isinstance(push, w.SlotClosed):
                self._report(
                    PairingFailed(
                        WrongWords(
                            "The other side closed the pairing: the words did not match, or they "
                            "gave up. Nothing was adopted; start a new pairing."
                        )
                    )
                )
                return
            elif push.from_side != self._side and await self._feed(machine, push):
                return

    async def _feed(self, machine: PairingMachine, push: w.SlotMsg) -> bool:
        """Give the machine one message; True when the pairing has ended."""
        try:
            machine.message_received(push.index, push.data)
        except (WrongWords, RemoteProtocolError) as exc:
            await self._flush(machine)  # our pending MAC tells the other side too
            await self._close_slot()
            self._report(PairingFailed(exc))
            return True
        await self._flush(machine)
        for event in machine.events_received():
            if isinstance(event, OfferReceived):
                return self._finish(event.offer)
        return False

    def _finish(self, offer: Offer) -> bool:
        if self._peer_ed_pub is None or offer.ed_pub != self._peer_ed_pub:
            # The offer must come from the identity the relay authenticated in the slot.
            self._report(
                PairingFailed(
                    RemoteProtocolError(
                        "The other side's offer names a different key than the one it "
                        "connected with; nothing was adopted."
                    )
                )
            )
        else:
            self._report(Paired(offer, self._peer_ed_pub))
        return True

    async def _flush(self, machine: PairingMachine) -> None:
        for index, data in machine.data_to_send():
            try:
                await self._relay.request(w.SlotSend(0, self._slot, index, data), w.Ok)
            except CrosstalkError as exc:
                if exc.code != "slot_part_written":  # a re-send after a restart: fine
                    raise

    async def _join(self) -> bool:
        """Take the slot's one join attempt; False (and reported) when the relay refuses."""
        try:
            joined = await self._relay.request_paid(
                lambda work: w.SlotJoin(0, self._slot, work), w.SlotJoined, slot=self._slot
            )
        except CrosstalkError as exc:
            if exc.code not in FINAL_SLOT_ERRORS:
                raise
            if exc.code == "slot_taken":
                exc = SlotNotFound(
                    "That code was already used: each code admits one join attempt. "
                    "Ask for a new one."
                )
            self._report(PairingFailed(exc))
            return False
        self._peer_ed_pub = joined.ed_pub
        return True

    async def _attach(self) -> None:
        await self._relay.request(w.SlotAttach(0, self._slot), w.Ok)

    async def _close_slot(self) -> None:
        try:
            await self._relay.request(w.SlotClose(0, self._slot), w.Ok)
        except CrosstalkError as exc:
            log.info("pairing %s: could not close the slot (%s)", self._slot, exc.message)

    def _report(self, outcome: PairingOutcome) -> None:
        if self._reported:
            return
        self._reported = True
        try:
            self._outcome.send_nowait(outcome)
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            log.info("pairing %s: nobody is waiting for the outcome any more", self._slot)
