"""Pairing slots: tiny mailboxes between a slot's owner and exactly one joiner (sans-IO).

Theory of operation
-------------------
``open`` gives the owner a 4-digit number, free at that moment, that lives ``slot_ttl`` seconds
(15 minutes) from opening. A slot is OPEN until someone joins, then JOINED until it is closed or
expires; a closed or expired slot is forgotten and its number may be handed out again.

* The slot admits one join attempt. The first ``join`` binds the joiner; every later one is
  ``slot_taken``. Wrong pairing words are noticed by the two clients, which then ``close`` (burn)
  the slot. Failed join attempts are the only guesses: the core rate-limits them per source
  address around :meth:`SlotTable.join`; a successful join and anything the owner does are not
  counted.
* Parts are write-once per (side, index). Each part is delivered to the other side's attached
  connections and kept, so a side that reconnects and ``attach``-es gets every part again.
* Slots are not durable: a relay restart ends every pairing in progress (the clients start over).

A successful join also records a grant: for ``grant_ttl`` the owner and joiner count as sharing a
room for one ``add`` (so the room of two made after pairing can be created).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from crosstalk.wire import relay as w
from crosstalk.wire.relay import MAX_SLOT_DATA, MAX_SLOT_INDEX, Side
from relay.effects import Effect, Send
from relay.limits import Buckets, RelayConfig
from relay.rooms import refuse


@attrs.frozen
class Peer:
    """An authenticated identity as the slot table needs it."""

    fingerprint: str
    ed_pub: bytes
    x_pub: bytes


@attrs.define
class PairingSlot:
    number: str
    owner: Peer
    expires_at: float
    joiner: Peer | None = None
    parts: dict[tuple[Side, int], bytes] = attrs.Factory(dict)
    attached: dict[Side, set[int]] = attrs.Factory(lambda: {"owner": set(), "joiner": set()})

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
    """Every live pairing slot and pairing grant."""

    def __init__(self, *, ttl: float, grant_ttl: float, max_open: int) -> None:
        self._ttl = ttl
        self._grant_ttl = grant_ttl
        self._max_open = max_open
        self.slots: dict[str, PairingSlot] = {}
        self.grants: dict[frozenset[str], float] = {}

    def open(self, owner: Peer, conn: int, now: float, draw: Callable[[int], bytes]) -> PairingSlot:
        """A new slot for ``owner``, attached to ``conn``; ``draw(n)`` gives n random bytes."""
        mine = sum(1 for s in self.slots.values() if s.owner.fingerprint == owner.fingerprint)
        if mine >= self._max_open:
            raise refuse("rate_limited", "you already have the most pairing slots open at once")
        start = int.from_bytes(draw(4), "big") % 10_000
        for step in range(10_000):
            number = f"{(start + step) % 10_000:04d}"
            if number not in self.slots:
                slot = PairingSlot(number, owner, expires_at=now + self._ttl)
                slot.attached["owner"].add(conn)
                self.slots[number] = slot
                return slot
        raise refuse("busy", "every pairing slot is in use; try again in a few minutes")

    def live(self, number: str, now: float) -> PairingSlot:
        slot = self.slots.get(number)
        if slot is None:
            raise refuse("slot_not_found", f"no pairing slot {number}; check the code")
        if now >= slot.expires_at:
            raise refuse("slot_expired", f"pairing slot {number} expired; start a new pairing")
        return slot

    def join(self, number: str, joiner: Peer, conn: int, now: float) -> PairingSlot:
        slot = self.live(number, now)
        if slot.joiner is not None:
            raise refuse("slot_taken", f"pairing slot {number} was already used; start again")
        if joiner.fingerprint == slot.owner.fingerprint:
            raise refuse("forbidden", "you cannot join your own pairing slot")
        slot.joiner = joiner
        slot.attached["joiner"].add(conn)
        pair = frozenset((slot.owner.fingerprint, joiner.fingerprint))
        self.grants[pair] = now + self._grant_ttl
        return slot

    def mine(self, number: str, fp: str, now: float) -> tuple[PairingSlot, Side]:
        """The slot and the caller's side in it; a stranger is told it does not exist."""
        slot = self.live(number, now)
        side = slot.side_of(fp)
        if side is None:
            raise refuse("slot_not_found", f"no pairing slot {number} of yours")
        return slot, side

    def write(self, slot: PairingSlot, side: Side, index: int, data: bytes) -> None:
        if not 0 <= index <= MAX_SLOT_INDEX:
            raise refuse("bad_frame", f"slot part index must be 0-{MAX_SLOT_INDEX}")
        if len(data) > MAX_SLOT_DATA:
            raise refuse("too_large", "a slot part is limited to 8 KiB")
        if (side, index) in slot.parts:
            raise refuse("slot_part_written", f"part {index} was already written; parts are final")
        slot.parts[(side, index)] = data

    def close(self, number: str) -> PairingSlot | None:
        return self.slots.pop(number, None)

    def expired(self, now: float) -> list[PairingSlot]:
        """Forget (and return) every slot past its expiry; drop stale grants."""
        gone = [s for s in self.slots.values() if now >= s.expires_at]
        for slot in gone:
            del self.slots[slot.number]
        self.grants = {k: t for k, t in self.grants.items() if now < t}
        return gone

    def detach(self, conn: int) -> None:
        for slot in self.slots.values():
            for conns in slot.attached.values():
                conns.discard(conn)

    def use_grant(self, a: str, b: str, now: float) -> bool:
        """Spend the pairing grant between ``a`` and ``b`` if there is a live one."""
        pair = frozenset((a, b))
        expiry = self.grants.get(pair)
        if expiry is None or now >= expiry:
            return False
        del self.grants[pair]
        return True


class PairingDesk:
    """The slot frames, for the core: owns the slot table and each source's guess budget."""

    def __init__(self, config: RelayConfig, draw: Callable[[int], bytes]) -> None:
        self.table = SlotTable(
            ttl=config.slot_ttl, grant_ttl=config.grant_ttl, max_open=config.max_open_slots
        )
        self._ttl = config.slot_ttl
        self._draw = draw
        self._guesses = Buckets(config.guess_rate, config.guess_burst)

    def handle(
        self, conn: int, peer: Peer, source: str, f: w.ClientFrame, now: float, out: list[Effect]
    ) -> None:
        """Apply one slot frame from an authenticated connection."""
        if isinstance(f, w.SlotOpen):
            slot = self.table.open(peer, conn, now, self._draw)
            out.append(Send(conn, w.Slot(f.req, slot.number, self._ttl)))
        elif isinstance(f, w.SlotJoin):
            self._join(conn, peer, source, f, now, out)
        elif isinstance(f, w.SlotAttach):
            self._attach(conn, peer, f, now, out)
        elif isinstance(f, w.SlotSend):
            slot, side = self.table.mine(f.slot, peer.fingerprint, now)
            self.table.write(slot, side, f.index, f.data)
            out.append(Send(conn, w.Ok(f.req)))
            msg = w.SlotMsg(slot.number, side, f.index, f.data)
            out.extend(Send(cid, msg) for cid in slot.attached[other(side)])
        elif isinstance(f, w.SlotClose):
            slot, _ = self.table.mine(f.slot, peer.fingerprint, now)
            self.table.close(slot.number)
            out.append(Send(conn, w.Ok(f.req)))
            closed = w.SlotClosed(slot.number, "closed")
            for conns in slot.attached.values():
                out.extend(Send(cid, closed) for cid in conns if cid != conn)

    def _join(
        self, conn: int, peer: Peer, source: str, f: w.SlotJoin, now: float, out: list[Effect]
    ) -> None:
        # Only a join that misses is a guess; a right number costs nothing, so busy places
        # (many pairings behind one address) are never throttled for succeeding.
        if not self._guesses.take(source, now):
            raise refuse("rate_limited", "too many pairing attempts from here; wait a minute")
        slot = self.table.join(f.slot, peer, conn, now)
        self._guesses.refund(source)
        owner = slot.owner
        reply = w.SlotJoined(f.req, slot.number, owner.fingerprint, owner.ed_pub, owner.x_pub)
        out.append(Send(conn, reply))
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

    def tick(self, now: float, out: list[Effect]) -> None:
        """Expire slots (telling attached sides) and forget idle guess budgets."""
        for slot in self.table.expired(now):
            for conns in slot.attached.values():
                out.extend(Send(cid, w.SlotClosed(slot.number, "expired")) for cid in conns)
        self._guesses.sweep(now)

    def detach(self, conn: int) -> None:
        self.table.detach(conn)
