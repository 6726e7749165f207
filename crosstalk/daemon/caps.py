"""What the daemon hands each feature's ``plug``: its capabilities, never the ``Daemon`` itself.

:class:`Granted` has exactly the members of :class:`crosstalk.features.caps.Capabilities` (a test
compares the two lists), each taken from the part of the daemon that owns it when the daemon is
made: plain values (the store, the home, the supervisor, the op table, the router's and the
membership actor's inboxes) as they are, the daemon's moves (send an op, wake a room, reach the
relay link) as its bound methods, and who we are read through at each use, since a pairing or a
link replaces it. A feature typed with a narrow ``Host`` cannot ``cast`` its way to the rest of
the daemon (its room table, its seams, its link store): they are not on this object.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Types only: crosstalk.daemon.tree imports this module; at runtime it needs nothing.
if TYPE_CHECKING:
    from crosstalk import crypto
    from crosstalk.daemon.tree import Daemon
    from crosstalk.store.identity import IdentityRecord


class Granted:
    """Every capability a feature may ask for (see crosstalk.features.caps)."""

    def __init__(self, daemon: Daemon) -> None:
        self._who = daemon  # read through for the identity only (pairing and link replace it)
        self.store = daemon.store
        self.home = daemon.home
        self.started_at = daemon.started_at
        self.heartbeat = daemon.heartbeat
        self.supervisor = daemon.supervisor
        self.ops = daemon.ops
        self.latency = daemon.latency
        self.tunnels = daemon.tunnels
        self.router = daemon.router
        self.membership = daemon.membership
        self.send_op = daemon.send_op
        self.room_inbox = daemon.room_inbox
        self.wake_room = daemon.wake_room
        self.forget_room = daemon.forget_room
        self.tell_local = daemon.tell_local
        self.relay = daemon.relay
        self.link_status = daemon.link_status
        self.use_relay = daemon.use_relay
        self.restart_link = daemon.restart_link
        self.feature_status = daemon.feature_status
        self.ensure_identity = daemon.ensure_identity
        self.adopt_identity = daemon.adopt_identity
        self.require_identity = daemon.require_identity
        self.own_label = daemon.own_label

    @property
    def identity(self) -> IdentityRecord | None:
        """This home's identity record (None before the first pairing)."""
        return self._who.identity

    @property
    def keys(self) -> crypto.Keys:
        """This identity's keys (NotSetUp without one)."""
        return self._who.keys
