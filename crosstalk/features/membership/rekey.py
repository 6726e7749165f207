"""Two members removing someone at once: both mint "the next epoch", with different keys.

Nothing orders the two mints, so neither key can simply win: every member keeps both (the first
it took is the one it seals with, the other an alternate it also opens with; see
``room_keys.take_rekeyed``), so nothing either side sends is lost. But each key was sealed to
its remover's roster, which may still have listed the member the other one removed. So one of
the two removers, the one with the lower fingerprint, rekeys once more for everyone left
(features/rooms/kick.py). That rekey cannot clash with a removed member's view of the room, and a
clash between two such rekeys (another removal at the same moment) is settled the same way.
"""

from __future__ import annotations

import sqlite3

from crosstalk import crypto
from crosstalk.core.room import Applied
from crosstalk.features.membership.keys import key_context
from crosstalk.store import room_keys
from crosstalk.wire.room_ops import Rekey


def minted_clash(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> bool:
    """Whether ``applied`` is someone else's ``Rekey`` for an epoch whose key we minted, with
    another key (it was applied: its key is now one of our alternates)."""
    op = applied.op
    if not isinstance(op, Rekey) or applied.sender == keys.fingerprint:
        return False
    sealed = op.sealed.get(keys.fingerprint)
    if sealed is None or not room_keys.minted_epoch(conn, applied.room_id, op.epoch):
        return False
    try:
        theirs = crypto.open_sealed(keys, sealed, context=key_context(applied.room_id, op.epoch))
    except crypto.OpenFailed:
        return False
    return theirs in room_keys.alternates(conn, applied.room_id, op.epoch)
