"""The proof of work a stranger pays for a pairing slot (sans-IO; part of the relay core).

Theory of operation
-------------------
Identities are free, so per-identity limits alone do not stop one person from opening a slot
with one throwaway key and joining it with another, over and over, until every number is taken.
Per-address limits bound one address; this bounds what many addresses can do, by making each
slot between two strangers cost CPU time the relay does not pay (docs/security.md, "Pairing
slots between strangers", argues the numbers).

A *stranger* is an identity that shares no room, both joined, with anyone on this relay
(:meth:`~relay.rooms.RoomBook.peers` is empty). Creating a room alone does not make one known.

* ``work_ask {slot?}`` gives the connection a fresh seed (replacing any earlier one) and the
  difficulty: ``slot_work_bits`` if the asker is a stranger and the slot it names (if any) is
  not owned by a known identity, else 0 (and no seed).
* ``slot_open`` by a stranger, and ``slot_join`` by a stranger at a slot whose owner is a
  stranger too (or at no live slot), must carry a proof for the connection's seed; the seed is
  spent by that frame whether or not the proof holds, so one proof buys one slot action and a
  proof cannot be found before the relay chose the seed. Otherwise ``work_required``.

A relay node decides a frame again after losing a compare-and-set, or to check a refusal against
fresh state (:mod:`relay.node`); it passes the same decoded frame object each time, so the frame
that spent the seed (``Conn.work_paid_by``) passes again. A new frame, even with the same proof,
is a new request and must pay anew.

The seed lives on the connection (16 bytes, gone with it): nothing here outlives a connection,
and a restart or another relay node simply asks again.
"""

from __future__ import annotations

from collections.abc import Callable

from crosstalk.crypto import work_done
from crosstalk.wire import relay as w
from relay.conn import Conn
from relay.rooms import refuse

SEED_SIZE = 16


class WorkDesk:
    """Hands out work seeds and checks the proofs that slot frames carry."""

    def __init__(self, bits: int, draw: Callable[[int], bytes],
                 known: Callable[[str], bool], owner_of: Callable[[str], str | None]) -> None:
        self._bits = bits
        self._draw = draw
        self._known = known
        self._owner_of = owner_of  # the owner's fingerprint of a live slot, or None

    def _owes(self, fp: str, slot: str | None) -> bool:
        if self._bits <= 0 or self._known(fp):
            return False
        if slot is None:  # an open
            return True
        owner = self._owner_of(slot)
        return owner is None or not self._known(owner)

    def ask(self, c: Conn, f: w.WorkAsk) -> w.Work:
        """Answer ``work_ask``: a fresh seed for ``c``, or 0 bits if it owes nothing."""
        if not self._owes(c.fp, f.slot or None):
            c.work_seed = None
            return w.Work(f.req, b"", 0)
        c.work_seed = self._draw(SEED_SIZE)
        return w.Work(f.req, c.work_seed, self._bits)

    def check(self, c: Conn, f: w.SlotOpen | w.SlotJoin) -> None:
        """Refuse (``work_required``) an open or join that owes work without a proof of it."""
        slot = f.slot if isinstance(f, w.SlotJoin) else None
        if not self._owes(c.fp, slot) or f is c.work_paid_by:
            return
        seed, c.work_seed = c.work_seed, None
        if seed is None or not work_done(seed, f.work, self._bits):
            raise refuse(
                "work_required",
                "this relay asks a new identity for a proof of work before a pairing slot: "
                "send work_ask and carry its proof in this frame's work (crosstalk does this "
                "itself since this version; upgrade)",
            )
        c.work_paid_by = f
