"""Membership's part in the daemon: the key-share applier and the listener that answers a joiner
who accepted with an older key (see :mod:`crosstalk.features.membership.key_share`)."""

from __future__ import annotations

import functools
import sqlite3
from typing import Protocol

from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, SendsOps, Stored
from crosstalk.features.feature import Plugs
from crosstalk.features.membership.key_share import apply_key_share, shares_owed
from crosstalk.wire.room_ops import MemberNamed


class Host(Stored, Identified, SendsOps, Protocol):
    """What membership's seams use: the store, our keys, and rooms to send key shares into."""


def plug(daemon: Host) -> Plugs:
    """The applier and the listener (membership has no control ops of its own here)."""
    def take_shared_key(conn: sqlite3.Connection, applied: Applied) -> None:
        apply_key_share(conn, applied, daemon.keys)

    async def answer_joiners(applied: list[Applied]) -> None:
        for entry in applied:
            if not isinstance(entry.op, MemberNamed):
                continue  # only a joiner naming itself can be owed keys: no read for the rest
            me = daemon.keys.fingerprint
            owed = await daemon.store.read(functools.partial(shares_owed, applied=entry, me=me))
            for share in owed:
                # Under the joiner's own epoch: the only key it is sure to hold.
                await daemon.send_op(entry.room_id, share, epoch=entry.epoch)

    return Plugs(
        appliers=(take_shared_key,),
        key_takers=(take_shared_key,),
        applied_listeners=(answer_joiners,),
    )
