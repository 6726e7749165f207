"""Membership's part in the daemon: the key-share appliers and the listener that answers a joiner
who accepted with an older key (see :mod:`crosstalk.features.membership.key_share`), and the
comparison of membership histories with roommates (fork detection)."""

from __future__ import annotations

import functools
import logging
import sqlite3
from typing import Protocol

from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, SendsOps, Stored
from crosstalk.features.feature import Plugs
from crosstalk.features.membership.key_share import apply_key_share, owe_shares, send_owed
from crosstalk.store import membership_chain as mc
from crosstalk.wire.room_ops import MemberNamed, SessionsPublished

log = logging.getLogger(__name__)


class Host(Stored, Identified, SendsOps, Protocol):
    """What membership's seams use: the store, our keys, and rooms to send key shares into."""


def compare_histories(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a roommate told us where their membership history stands; if we hold that
    statement with another link, the relay has shown us different histories (a fork), and the
    person is told (``crosstalk room``, the page). A head past ours is just news not yet here."""
    op = applied.op
    if not isinstance(op, SessionsPublished) or op.membership < 0:
        return
    ours = mc.link_at(conn, applied.room_id, op.membership)
    if ours is None or ours == op.membership_link:
        return
    reason = (f"{applied.sender[:9]} was shown another membership history than ours (at "
              f"statement {op.membership}): the relay is showing members different histories")
    if mc.raise_alarm(conn, applied.room_id, reason, applied.relay_ts):
        log.warning("room %s: %s", applied.room_id, reason)


def take_shared_key(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier and key taker: a key share sealed to us gives us the room's keys."""
    apply_key_share(conn, applied, daemon.keys)


def owe(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a joiner that named itself under an older epoch is owed the newer keys."""
    owe_shares(conn, applied, daemon.keys.fingerprint)


async def answer_joiners(daemon: Host, applied: list[Applied]) -> None:
    """Listener: send the key shares owed to the joiners of a committed batch."""
    # Only a joiner naming itself can be owed keys: no read for the rest.
    rooms = {e.room_id for e in applied if isinstance(e.op, MemberNamed)}
    if rooms:
        await send_owed(daemon.store, daemon.send_op, rooms)


def plug(daemon: Host) -> Plugs:
    """The appliers and the listener (membership has no control ops of its own here)."""
    taker = functools.partial(take_shared_key, daemon)
    return Plugs(
        appliers=(taker, functools.partial(owe, daemon), compare_histories),
        key_takers=(taker,),
        applied_listeners=(functools.partial(answer_joiners, daemon),),
    )
