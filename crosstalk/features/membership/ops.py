"""Membership's part in the daemon: the key-share applier and the listener that answers a joiner
who accepted with an older key (see :mod:`crosstalk.features.membership.key_share`)."""

from __future__ import annotations

import functools
import sqlite3

from crosstalk.actors.control import OpTable
from crosstalk.core.room import Applied
from crosstalk.daemon import Daemon
from crosstalk.features.membership.key_share import apply_key_share, shares_owed


def register(ops: OpTable, daemon: Daemon) -> None:
    """Add the applier and the listener (membership has no control ops of its own here)."""
    del ops
    def take_shared_key(conn: sqlite3.Connection, applied: Applied) -> None:
        apply_key_share(conn, applied, daemon.keys)

    daemon.appliers.append(take_shared_key)
    daemon.key_takers.append(take_shared_key)

    async def answer_joiners(applied: list[Applied]) -> None:
        for entry in applied:
            me = daemon.keys.fingerprint
            owed = await daemon.store.read(functools.partial(shares_owed, applied=entry, me=me))
            for share in owed:
                # Under the joiner's own epoch: the only key it is sure to hold.
                await daemon.send_op(entry.room_id, share, epoch=entry.epoch)

    daemon.applied_listeners.append(answer_joiners)
