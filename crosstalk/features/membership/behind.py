"""A joiner whose room key may be older than the room's newest, about to remove someone.

An invitation brings the room's key as its inviter held it then. A member removed after that
was followed by a ``Rekey`` the joiner cannot read (its relay cursor starts when it accepts); the
newer key reaches it as a ``KeyShare`` once a member who holds it reads the joiner's first op
(:mod:`crosstalk.features.membership.key_share`). A joiner that removed someone before that share
came would mint "the next epoch" from its old key: a second key for an epoch the room already
has. Members holding both keys for it read everything; the joiner opens nothing sent under the
other, and a member who accepts later with the other key is never read by it (the simulation's
REJOINED_WITH_A_HOLE at seed 7).

So a remover first waits, a bounded while, for a key newer than its invitation's when the
signed history shows someone was removed between its invitation and its acceptance. If none
comes (every member who holds one is away), it mints past every epoch those removals can have
made, so its key at least never shares an epoch with theirs.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Sequence

import trio

from crosstalk import sim_hooks
from crosstalk.store import membership as mq
from crosstalk.store import membership_chain as mc
from crosstalk.store.db import Store
from crosstalk.store.rooms import get_room
from crosstalk.wire.chain import Statement

log = logging.getLogger(__name__)

KEY_WAIT = 15.0  # seconds a remover waits for a newer key: a share is one round trip away
KEY_POLL = 0.25


def removals_unread(statements: Sequence[Statement], me: str) -> int:
    """How many removals of others, by others, the history holds between our last invitation
    and our acceptance of it (0 when we made the room). Each was followed by a rekey to an
    epoch newer than the key our invitation brought, at most one epoch each, that may have
    been sequenced before our relay cursor starts; a removal after we joined is followed by a
    rekey we read like any op."""
    invited = [i for i, s in enumerate(statements) if s.kind == "invite" and s.subject == me]
    if not invited:
        return 0
    count = 0
    for s in statements[invited[-1] + 1:]:
        if s.kind == "accept" and s.actor == me:
            break
        count += s.kind == "remove" and me not in (s.actor, s.subject)
    return count


def holds_only_invited_key(conn: sqlite3.Connection, room_id: str) -> bool:
    """Whether the newest key we hold for the room is the one our invitation brought."""
    invited = mq.invited_epoch(conn, room_id)
    return invited is not None and get_room(conn, room_id).epoch <= invited


def epochs_behind(conn: sqlite3.Connection, room_id: str, me: str) -> int:
    """How many epochs the room may have past the newest key we hold: 0 unless we still hold
    only keys as old as our invitation's and the history shows removals we may not have read
    the rekeys of."""
    if not holds_only_invited_key(conn, room_id):
        return 0
    return removals_unread(mc.statements(conn, room_id), me)


async def wait_for_newer_key(
    store: Store, room_id: str, me: str, *, within: float = KEY_WAIT
) -> int:
    """Wait, at most ``within`` seconds, until :func:`epochs_behind` is 0; what it is then."""
    behind = functools.partial(epochs_behind, room_id=room_id, me=me)
    with trio.move_on_after(within):
        while await store.read(behind):
            sim_hooks.probe("kick.waited_for_newer_key")
            await trio.sleep(KEY_POLL)
        return 0
    left = await store.read(behind)
    if left:
        log.warning("room %s: no newer key came in %.0f s; the next epoch skips %d", room_id,
                    within, left)
    return left
