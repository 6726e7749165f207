"""Asking the relay for a membership change: each carries our signed statement of it.

Members believe a room's membership history, never the relay's rows
(:mod:`crosstalk.wire.chain`), so every change we ask for is a statement signed on the newest
head we hold. The relay refuses one signed on a head from before the last change about its
subject or about us (``stale_chain``): we fetch the history, which the membership actor applies,
and sign again on the new head (at most :data:`TRIES` times). A retry of the same change after
a lost answer signs the same statement again (Ed25519 signatures are deterministic), which the
relay answers as it answers any repeated request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.errors import CrosstalkError
from crosstalk.features.caps import FollowsRosters, Identified, Linked, Stored
from crosstalk.features.membership.actor import fetch_roster
from crosstalk.store import membership_chain as mc
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ZERO, Kind, Statement, next_link, sign_statement

TRIES = 3
"""Statements signed for one change before a ``stale_chain`` refusal is given up on."""


class Host(Stored, Identified, Linked, FollowsRosters, Protocol):
    """What a membership change needs: the history we hold, our keys, the relay, and the
    membership actor (which applies the history we fetch)."""


Change = w.Create | w.Add | w.Accept | w.Decline | w.Leave | w.Remove
MakeFrame = Callable[[Statement], Change]


def create_frame(keys: crypto.Keys, room_id: str) -> tuple[w.Create, Statement]:
    """The ``create`` request for ``room_id`` and the statement it carries (the room's first:
    us, with our keys)."""
    stmt = sign_statement(keys, room_id, "create", keys.fingerprint, ed_pub=keys.ed_pub,
                          x_pub=keys.x_pub)
    sig = crypto.sign(keys, w.member_transcript(room_id, keys.ed_pub, keys.x_pub))
    return w.Create(0, room_id, sig, stmt), stmt


def add_after_create(
    keys: crypto.Keys, room_id: str, created: Statement, ed_pub: bytes, x_pub: bytes
) -> w.Add:
    """The ``add`` of a room's first invitee, made right after our create (a room of two from a
    pairing): the create is statement 0 wherever the relay put it, so its link is known."""
    stmt = sign_statement(
        keys, room_id, "invite", crypto.fingerprint(ed_pub), ed_pub=ed_pub, x_pub=x_pub,
        after=0, after_link=next_link(ZERO, created),
    )
    sig = crypto.sign(keys, w.member_transcript(room_id, ed_pub, x_pub))
    return w.Add(0, room_id, ed_pub, x_pub, sig, stmt)


async def request_change(
    host: Host,
    room_id: str,
    kind: Kind,
    subject: str,
    make: MakeFrame,
    *,
    ed_pub: bytes = b"",
    x_pub: bytes = b"",
    fetch_first: bool = False,
    relay: RelayClient | None = None,
) -> None:
    """Sign our statement of a change on the newest head we hold and ask the relay for it.

    ``fetch_first``: fetch the room's history before signing (an invitee holds none yet).

    Raises:
        CrosstalkError: the relay refused the change (``stale_chain`` only after
            :data:`TRIES` statements), or did not answer.
    """
    relay = relay or await host.relay()
    for attempt in range(TRIES):
        if fetch_first or attempt:
            await fetch_roster(host.store, relay, host.membership, room_id)
        after, link = await host.store.read(lambda conn: mc.head(conn, room_id))
        stmt = sign_statement(host.keys, room_id, kind, subject, ed_pub=ed_pub, x_pub=x_pub,
                              after=after, after_link=link)
        try:
            await relay.request(make(stmt), w.Ok)
            return
        except CrosstalkError as exc:
            if exc.code != "stale_chain" or attempt == TRIES - 1:
                raise


def with_statement(frame: Change) -> MakeFrame:
    """A maker that puts the statement into ``frame`` (a membership request)."""

    def make(stmt: Statement) -> Change:
        made: Change = attrs.evolve(frame, stmt=stmt)
        return made

    return make
