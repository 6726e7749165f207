"""The presence feature's daemon side: the applier, the actor, and what ``peers`` reads."""

from __future__ import annotations

import functools
import sqlite3
from typing import Protocol

from crosstalk.actors.children import ChildSpec
from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, SendsOps, Stored, has_identity, own_fingerprint
from crosstalk.features.feature import Plugs
from crosstalk.features.presence.actor import PresenceActor
from crosstalk.store.presence import apply_published


class Host(Stored, Identified, SendsOps, Protocol):
    """What presence uses: the store, who we are, and its actor, which posts into rooms."""


def keep(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: keep a roommate's published sessions (never our own)."""
    apply_published(conn, applied, me=own_fingerprint(daemon))


def plug(daemon: Host) -> Plugs:
    """Keep roommates' published sessions; publish ours (no control ops of its own: ``peers``
    and ``status`` read :func:`~crosstalk.store.presence.peer_sessions`)."""
    make = functools.partial(
        PresenceActor, store=daemon.store, send_op=daemon.send_op,
        ready=functools.partial(has_identity, daemon),
    )
    return Plugs(
        appliers=(functools.partial(keep, daemon),),
        children=(ChildSpec("presence", make),),
    )
