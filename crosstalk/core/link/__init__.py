"""The relay link's rules, with no I/O: small machines under one boss.

* :mod:`~crosstalk.core.link.handshake`: challenge, signed hello, signed ready, the key pin.
* :mod:`~crosstalk.core.link.resume`: the cursors; resume, inbound ops, acknowledgements.
* :mod:`~crosstalk.core.link.requests`: requests held for READY, matched to replies, timed out.
* :mod:`~crosstalk.core.link.outbox`: posts in order, one per room in flight, retried.
* :mod:`~crosstalk.core.link.boss`: :class:`LinkBoss` owns the four, decides when to dial and
  drop, and routes every input; the relay-link actor's one driver task is its only caller.

What the rest of the daemon needs is importable from here.
"""

from __future__ import annotations

from crosstalk.core.link.boss import LinkBoss, LinkState
from crosstalk.core.link.common import (
    BACKOFF_CAP,
    REQUEST_FRAMES,
    OutboxItem,
    RequestFrame,
    Resealed,
    backoff_delay,
    post_retry_delay,
    relay_error,
)

__all__ = [
    "BACKOFF_CAP",
    "REQUEST_FRAMES",
    "LinkBoss",
    "LinkState",
    "OutboxItem",
    "RequestFrame",
    "Resealed",
    "backoff_delay",
    "post_retry_delay",
    "relay_error",
]
