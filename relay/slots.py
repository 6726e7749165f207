"""Pairing slots: tiny mailboxes between a slot's owner and exactly one joiner (sans-IO).

Theory of operation
-------------------
``open`` gives the owner a 4-digit number, free at that moment, that lives ``slot_ttl`` seconds
(15 minutes) from opening. A slot is OPEN until someone joins, then JOINED until it is closed or
expires; a closed or expired slot is forgotten and its number may be handed out again.

* The slot admits one join attempt. The first ``join`` binds the joiner; a join by anyone else
  afterwards is ``slot_taken`` (the joiner itself joining again, say after its reply was lost
  in a failover, is answered again: it gains nothing, since its parts are write-once). Wrong
  pairing words are noticed by the two clients, which then ``close`` (burn) the slot. Joins at a
  number with no live slot are the only guesses: the core rate-limits them per source address
  (the tunnel's reported client address behind our own tunnel, see ``relay.server``). A join at
  a live slot is never limited, since its single attempt already bounds it and a stranger's
  misses from a shared address must not lock out the holder of the right code; nothing the
  owner does is counted.
* Opens, and joins at a live slot, are rate-limited per source address and per identity
  (:meth:`PairingDesk.admit`, before anything else about the frame): identities are free, so
  the address is what a stranger cannot multiply, and the identity bucket keeps one key from
  using up an address it shares. An address may also hold only ``max_slots_per_source`` live
  slots (open or joined: a joined slot holds its number until it is closed or expires). A slot
  between two strangers also costs a proof of work (:mod:`relay.work`, checked by the core).
* Parts are write-once per (side, index). Each part is delivered to the other side's attached
  connections and kept, so a side that reconnects and ``attach``-es gets every part again.

Durability. Every change is also returned as a :data:`~relay.storage.Write` (``SlotOpened``,
``SlotFilled``, ``SlotPartPut``, ``SlotRemoved``, and ``GrantPut``/``GrantDeleted`` for grants),
placed before the frames that tell anyone about it, so the shell commits it first. A relay that
restarts, or a newly elected cluster leader, loads the live slots and grants from its
:class:`~relay.storage.Snapshot`: a pairing in progress carries on once both sides reconnect and
attach, and a slot whose join was spent stays spent, so no restart hands a guesser a fresh attempt
on the same slot. Attachments (which connections watch a slot) are not stored: every connection
is new after a restart.

The per-source guess and slot buckets (and each slot's source address) stay in memory on
purpose: they are a rate (guesses per address per window), not a budget of any one slot. A
restart or failover at worst starts one window afresh for each address, which lets an attacker
make at most ``guess_burst`` more join attempts, each on a slot whose own single attempt is
durable; to gain more it would have to crash the relay.

A successful join also records a grant: for ``grant_ttl`` the owner and joiner count as sharing a
room for one ``add`` (so the room of two made after pairing can be created, after a failover too).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from crosstalk.wire import relay as w
from crosstalk.wire.relay import MAX_SLOT_DATA, MAX_SLOT_INDEX, Side
from relay.effects import Effect, Send
from relay.limits import Buckets, RelayConfig
from relay.rooms import refuse
from relay.storage import (
    GrantDeleted,
    GrantPut,
    Peer,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    Snapshot,
    Write,
    grant_key,
)

__all__ = ["PairingDesk", "PairingSlot", "Peer", "SlotTable"]


@attrs.define
class PairingSlot:
    number: str
    owner: Peer
    expires_at: float
    joiner: Peer | None = None
    parts: dict[tuple[Side, int], bytes] = attrs.Factory(dict)
    attached: dict[Side, set[int]] = attrs.Factory(lambda: {"owner": set(), "joiner": set()})
    opened_from: str = ""  # the owner's source address (not stored: "" after a restart)

    def side_of(self, fp: str) -> Side | None:
        if fp == self.owner.fingerprint:
            return "owner"
        if self.joiner is not None and fp == self.joiner.fingerprint:
            return "joiner"
        return None

    def parts_from(self, side: Side) -> list[tuple[int, bytes]]:
        return sorted((i, data) for (s, i), data in self.parts.items() if s == side)


def other(side: Side) -> Side:
    return "joiner" if side == "owner" else "owner"


class SlotTable:
    """Every live pairing slot and pairing grant; each change comes back as its writes."""

    def __init__(self, *, ttl: float, grant_ttl: float, max_open: int) -> None:
        self._ttl = ttl
        self._grant_ttl = grant_ttl
        self._max_open = max_open
        self.slots: dict[str, PairingSlot] = {}
        self.grants: dict[tuple[str, str], float] = {}

    def load(self, snapshot: Snapshot) -> None:
        """Take the live slots and grants a restarted (or newly elected) relay starts from."""
        for record in snapshot.slots:
            slot = PairingSlot(record.number, record.owner, record.expires_at, record.joiner)
            slot.parts = {(p.side, p.index): p.data for p in record.parts}
            self.slots[record.number] = slot
        self.grants.update(((g.a, g.b), g.expires_at) for g in snapshot.grants)

    def open(
        self, owner: Peer, conn: int, now: float, draw: Callable[[int], bytes], source: str = ""
    ) -> tuple[PairingSlot, list[Write]]:
        """A new slot for ``owner``, attached to ``conn``; ``draw(n)`` gives n random bytes."""
        # Only slots still waiting for their joiner count: a joined (finished) slot may stay
        # until it expires, and counting it locked people out after three pairings.
        mine = sum(
            1
            for s in self.slots.values()
            if s.owner.fingerprint == owner.fingerprint and s.joiner is None and now < s.expires_at
        )
        if mine >= self._max_open:
            raise refuse("rate_limited", "you already have the most pairing slots open at once")
        start = int.from_bytes(draw(4), "big") % 10_000
        for step in range(10_000):
            number = f"{(start + step) % 10_000:04d}"
            if number not in self.slots:
                slot = PairingSlot(number, owner, expires_at=now + self._ttl, opened_from=source)
                slot.attached["owner"].add(conn)
                self.slots[number] = slot
                return slot, [SlotOpened(number, owner, slot.expires_at)]
        raise refuse("busy", "every pairing slot is in use; try again in a few minutes")

    def live(self, number: str, now: float) -> PairingSlot:
        slot = self.slots.get(number)
        if slot is None:
            raise refuse("slot_not_found", f"no pairing slot {number}; check the code")
        if now >= slot.expires_at:
            raise refuse("slot_expired", f"pairing slot {number} expired; start a new pairing")
        return slot

    def join(
        self, number: str, joiner: Peer, conn: int, now: float
    ) -> tuple[PairingSlot, list[Write]]:
        """Spend the slot's one join on ``joiner`` (no writes if it already holds it)."""
        slot = self.live(number, now)
        if slot.joiner is not None:
            if slot.joiner != joiner:
                raise refuse("slot_taken", f"pairing slot {number} was already used; start again")
            slot.attached["joiner"].add(conn)
            return slot, []
        if joiner.fingerprint == slot.owner.fingerprint:
            raise refuse("forbidden", "you cannot join your own pairing slot")
        slot.joiner = joiner
        slot.attached["joiner"].add(conn)
        a, b = grant_key(slot.owner.fingerprint, joiner.fingerprint)
        self.grants[(a, b)] = now + self._grant_ttl
        return slot, [SlotFilled(number, joiner), GrantPut(a, b, now + self._grant_ttl)]

    def mine(self, number: str, fp: str, now: float) -> tuple[PairingSlot, Side]:
        """The slot and the caller's side in it; a stranger is told it does not exist."""
        slot = self.live(number, now)
        side = slot.side_of(fp)
        if side is None:
            raise refuse("slot_not_found", f"no pairing slot {number} of yours")
        return slot, side

    def write(self, slot: PairingSlot, side: Side, index: int, data: bytes) -> list[Write]:
        if not 0 <= index <= MAX_SLOT_INDEX:
            raise refuse("bad_frame", f"slot part index must be 0-{MAX_SLOT_INDEX}")
        if len(data) > MAX_SLOT_DATA:
            raise refuse("too_large", "a slot part is limited to 8 KiB")
        if (side, index) in slot.parts:
            raise refuse("slot_part_written", f"part {index} was already written; parts are final")
        slot.parts[(side, index)] = data
        return [SlotPartPut(slot.number, side, index, data)]

    def put(self, number: str, owner: Peer, expires_at: float) -> None:
        """Take a slot another relay node opened (no writes: it is stored already)."""
        self.slots[number] = PairingSlot(number, owner, expires_at)

    def forget(self, number: str) -> None:
        """Drop a slot from this table only (another node closed it, or it is being reloaded)."""
        self.slots.pop(number, None)

    def close(self, number: str) -> tuple[PairingSlot | None, list[Write]]:
        slot = self.slots.pop(number, None)
        return slot, ([] if slot is None else [SlotRemoved(number)])

    def expired(self, now: float) -> tuple[list[PairingSlot], list[Write]]:
        """Forget (and return) every slot past its expiry; drop stale grants."""
        gone = [s for s in self.slots.values() if now >= s.expires_at]
        writes: list[Write] = []
        for slot in gone:
            del self.slots[slot.number]
            writes.append(SlotRemoved(slot.number))
        stale = sorted(k for k, t in self.grants.items() if now >= t)
        for key in stale:
            del self.grants[key]
            writes.append(GrantDeleted(*key))
        return gone, writes

    def detach(self, conn: int) -> None:
        for slot in self.slots.values():
            for conns in slot.attached.values():
                conns.discard(conn)

    def use_grant(self, a: str, b: str, now: float) -> list[Write] | None:
        """Spend the pairing grant between ``a`` and ``b``: its writes, or None if none is live."""
        key = grant_key(a, b)
        expiry = self.grants.get(key)
        if expiry is None or now >= expiry:
            return None
        del self.grants[key]
        return [GrantDeleted(*key)]


class PairingDesk:
    """The slot frames, for the core: owns the slot table and each source's guess budget."""

    def __init__(
        self, config: RelayConfig, draw: Callable[[int], bytes], snapshot: Snapshot | None = None
    ) -> None:
        self.table = SlotTable(
            ttl=config.slot_ttl, grant_ttl=config.grant_ttl, max_open=config.max_open_slots
        )
        if snapshot is not None:
            self.table.load(snapshot)
        self._ttl = config.slot_ttl
        self._draw = draw
        self._guesses = Buckets(config.guess_rate, config.guess_burst)
        self._by_source = Buckets(config.slot_rate, config.slot_burst)
        self._by_identity = Buckets(config.slot_identity_rate, config.slot_identity_burst)
        self._max_per_source = config.max_slots_per_source

    def owner_of(self, number: str) -> str | None:
        """The owner's fingerprint of slot ``number``, if one is stored (live or not)."""
        slot = self.table.slots.get(number)
        return None if slot is None else slot.owner.fingerprint

    def admit(self, fp: str, source: str, f: w.SlotOpen | w.SlotJoin, now: float) -> None:
        """Refuse (``rate_limited``) an open or a join at a live slot past its source's or its
        identity's rate, or an open past the live slots its source may hold. A join that
        misses is a guess, counted by :meth:`_join` instead."""
        if isinstance(f, w.SlotJoin):
            live = self.table.slots.get(f.slot)
            if live is None or now >= live.expires_at:
                return
        elif source and self._live_from(source, now) >= self._max_per_source:
            raise refuse("rate_limited", "too many pairing slots are open from your address; "
                                         "close some or wait for them to expire")
        if not self._by_source.take(source, now):
            raise refuse("rate_limited", "too many pairing slots from your address; wait a minute")
        if not self._by_identity.take(fp, now):
            self._by_source.refund(source)
            raise refuse("rate_limited", "too many pairing slots for you; wait a minute")

    def _live_from(self, source: str, now: float) -> int:
        # A scan, not a count kept alongside: nothing to keep in step with closes, expiries,
        # reloads and other nodes' changes (and at most 10,000 slots, only for an open that
        # passed the rate limits).
        return sum(1 for s in self.table.slots.values()
                   if s.opened_from == source and now < s.expires_at)

    def handle(
        self, conn: int, peer: Peer, source: str, f: w.ClientFrame, now: float, out: list[Effect]
    ) -> None:
        """Apply one slot frame from an authenticated connection."""
        if isinstance(f, w.SlotOpen):
            slot, writes = self.table.open(peer, conn, now, self._draw, source)
            out.extend(writes)
            out.append(Send(conn, w.Slot(f.req, slot.number, self._ttl)))
        elif isinstance(f, w.SlotJoin):
            self._join(conn, peer, source, f, now, out)
        elif isinstance(f, w.SlotAttach):
            self._attach(conn, peer, f, now, out)
        elif isinstance(f, w.SlotSend):
            slot, side = self.table.mine(f.slot, peer.fingerprint, now)
            out.extend(self.table.write(slot, side, f.index, f.data))
            out.append(Send(conn, w.Ok(f.req)))
            msg = w.SlotMsg(slot.number, side, f.index, f.data)
            out.extend(Send(cid, msg) for cid in slot.attached[other(side)])
        elif isinstance(f, w.SlotClose):
            slot, _ = self.table.mine(f.slot, peer.fingerprint, now)
            out.extend(self.table.close(slot.number)[1])
            out.append(Send(conn, w.Ok(f.req)))
            closed = w.SlotClosed(slot.number, "closed")
            for conns in slot.attached.values():
                out.extend(Send(cid, closed) for cid in conns if cid != conn)

    def _join(
        self, conn: int, peer: Peer, source: str, f: w.SlotJoin, now: float, out: list[Effect]
    ) -> None:
        # Only a join that misses is a guess. A join at a slot that exists is never limited:
        # the slot's one attempt already bounds it, and behind a shared address (a tunnel, a
        # NAT) strangers' misses must not lock out the person holding the right code.
        live = self.table.slots.get(f.slot)
        if live is None or now >= live.expires_at:
            if not self._guesses.take(source, now):
                raise refuse("rate_limited", "too many pairing attempts from here; wait a minute")
        slot, writes = self.table.join(f.slot, peer, conn, now)
        out.extend(writes)
        owner = slot.owner
        reply = w.SlotJoined(f.req, slot.number, owner.fingerprint, owner.ed_pub, owner.x_pub)
        out.append(Send(conn, reply))
        if writes:  # a first join: the owner learns who joined
            joined = w.SlotJoined(None, slot.number, peer.fingerprint, peer.ed_pub, peer.x_pub)
            out.extend(Send(cid, joined) for cid in slot.attached["owner"])
        for index, data in slot.parts_from("owner"):
            out.append(Send(conn, w.SlotMsg(slot.number, "owner", index, data)))

    def _attach(
        self, conn: int, peer: Peer, f: w.SlotAttach, now: float, out: list[Effect]
    ) -> None:
        slot, side = self.table.mine(f.slot, peer.fingerprint, now)
        slot.attached[side].add(conn)
        out.append(Send(conn, w.Ok(f.req)))
        j = slot.joiner
        if side == "owner" and j is not None:
            out.append(Send(conn, w.SlotJoined(None, slot.number, j.fingerprint, j.ed_pub,
                                               j.x_pub)))
        for index, data in slot.parts_from(other(side)):
            out.append(Send(conn, w.SlotMsg(slot.number, other(side), index, data)))

    def spend_grant(self, a: str, b: str, now: float, out: list[Effect]) -> bool:
        """Use the pairing grant between ``a`` and ``b`` (its deletion goes to ``out``)."""
        writes = self.table.use_grant(a, b, now)
        if writes is None:
            return False
        out.extend(writes)
        return True

    def tick(self, now: float, out: list[Effect]) -> None:
        """Expire slots and grants (telling attached sides) and forget idle guess budgets."""
        gone, writes = self.table.expired(now)
        out.extend(writes)
        for slot in gone:
            for conns in slot.attached.values():
                out.extend(Send(cid, w.SlotClosed(slot.number, "expired")) for cid in conns)
        self._guesses.sweep(now)
        self._by_source.sweep(now)
        self._by_identity.sweep(now)

    def detach(self, conn: int) -> None:
        self.table.detach(conn)
