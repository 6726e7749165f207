"""What features may ask of the daemon: small capability protocols, never the ``Daemon`` itself.

Each feature's ``plug`` names the protocols it uses (a feature that only reads and writes the
store asks for :class:`Stored`), composing them into one protocol of its own; :class:`Capabilities`
is all of them together, what the daemon offers: it hands ``plug`` a
:class:`crosstalk.daemon.caps.Granted`, which has exactly these members and satisfies them
structurally, so a feature imports this module and nothing of ``crosstalk.daemon.tree``, and a
test can hand a feature a small fake that has only what it asks for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

# Types only: this module is imported by every feature, at runtime it needs nothing.
if TYPE_CHECKING:
    import subprocess

    import trio

    from crosstalk import crypto
    from crosstalk.actors.control import OpTable
    from crosstalk.actors.relay_client import RelayClient
    from crosstalk.actors.relay_link import LinkStatus
    from crosstalk.actors.relay_link_api import OutboxWrite
    from crosstalk.actors.room import RoomInput
    from crosstalk.actors.router import RouterInput
    from crosstalk.actors.supervisor import Supervisor
    from crosstalk.core.latency import DaemonLatency
    from crosstalk.core.room import Applied
    from crosstalk.features.membership.actor import MembershipInput
    from crosstalk.paths import Home
    from crosstalk.store.db import Store
    from crosstalk.store.identity import IdentityRecord
    from crosstalk.wire.room_ops import RoomOp


class Stored(Protocol):
    """Read and write the store (``await store.read(fn)``, ``await store.write(fn)``)."""

    store: Store


class Identified(Protocol):
    """Who we are: the identity record (None before the first pairing) and its keys."""

    @property
    def identity(self) -> IdentityRecord | None: ...

    @property
    def keys(self) -> crypto.Keys: ...

    def require_identity(self) -> IdentityRecord: ...

    def own_label(self) -> str: ...


class SendsOps(Protocol):
    """Seal an op into a room and commit it to the outbox; reach or wake a room's actor."""

    async def send_op(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None, epoch: int | None = None,
        also: OutboxWrite | None = None,
    ) -> str: ...

    async def room_inbox(self, room_id: str) -> trio.MemorySendChannel[RoomInput] | None: ...

    async def wake_room(self, room_id: str) -> None: ...


class TellsLocal(Protocol):
    """Hand arrivals that crossed no relay to the local listeners (the gate, watch, the inbox)."""

    async def tell_local(self, applied: list[Applied]) -> None: ...


class Routed(Protocol):
    """The router's inbox: watch for a sent op, an invitation, a pairing slot, presence."""

    router: trio.MemorySendChannel[RouterInput]


class FollowsRosters(Protocol):
    """The membership actor's inbox: every roster is applied there, in the relay's order
    (``crosstalk.features.membership.actor.fetch_roster`` fetches one through it)."""

    membership: trio.MemorySendChannel[MembershipInput]


class Linked(Protocol):
    """The relay link: its handle (started on first use) and its state."""

    async def relay(self, *, as_keys: crypto.Keys | None = None) -> RelayClient: ...

    def link_status(self) -> LinkStatus | None: ...


class Supervises(Protocol):
    """Start and stop actors under the daemon's supervisor."""

    supervisor: Supervisor


class CallsOps(Protocol):
    """The daemon's own op table, to run another feature's op in-process (the page, the hook's
    combined ``hook_event``)."""

    ops: OpTable


class Homed(Protocol):
    """The home directory and this daemon's own facts."""

    home: Home
    started_at: float
    heartbeat: float


class ShowsStatus(Protocol):
    """What each feature shows in ``status``, by feature name."""

    async def feature_status(self) -> dict[str, Any]: ...


class Measured(Protocol):
    """The daemon's latency windows (send -> posted, hook requests), for ``status``."""

    latency: DaemonLatency


class MakesIdentity(Protocol):
    """Create this home's identity on first use, or adopt one a linked machine sent."""

    async def ensure_identity(self, label: str | None) -> crypto.Keys: ...

    def adopt_identity(self, record: IdentityRecord) -> None: ...


class MovesRelay(Protocol):
    """Move to another relay (``--host``, an invite naming one, a link), keep a tunnel open."""

    tunnels: list[subprocess.Popen[bytes]]

    async def use_relay(self, url: str) -> None: ...

    async def restart_link(self) -> None: ...


class ForgetsRooms(Protocol):
    """Stop a room's actor (we left it or declined it)."""

    async def forget_room(self, room_id: str) -> None: ...


def has_identity(who: Identified) -> bool:
    """Whether this home has an identity yet (a readiness check actors are given)."""
    return who.identity is not None


def keys_of(who: Identified) -> crypto.Keys:
    """Our keys (NotSetUp without an identity), read at each call: a link replaces them."""
    return who.keys


def own_fingerprint(who: Identified) -> str:
    """Our fingerprint, or "" before there is an identity (appliers compare senders with it)."""
    return who.keys.fingerprint if who.identity is not None else ""


class Capabilities(
    Stored,
    Identified,
    SendsOps,
    TellsLocal,
    Routed,
    FollowsRosters,
    Linked,
    Supervises,
    CallsOps,
    Homed,
    ShowsStatus,
    Measured,
    MakesIdentity,
    MovesRelay,
    ForgetsRooms,
    Protocol,
):
    """Everything the daemon offers features: what ``Feature.plug`` is called with."""
