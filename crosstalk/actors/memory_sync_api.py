"""What the memory-sync actor takes and reads: its inbox's messages and its store.

Messages arrive in the actor's inbox (:data:`MemorySyncInput`): from the memory feature's
listeners (:class:`Nudge`, :class:`Answer`, :class:`SnapshotSeen`, :class:`WatchOwn`,
:class:`Resumed`) and from the start probe (:class:`WatchOwn`, :class:`Probed`). The store it
reads and writes is a :class:`SyncStore`; the real one is
:class:`crosstalk.actors.memory_sync_store.StoreAdapter`.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from crosstalk.core.memory_sync import OurMemory
from crosstalk.store.memory import MemoryCursor
from crosstalk.wire.memory import MemorySnapshot, Outcome


@attrs.frozen
class Nudge:
    """Ops were just committed in these rooms: look for holes and resolved outcomes."""

    rooms: tuple[str, ...]


@attrs.frozen
class Answer:
    """``requester`` asked us for the memory of ``room``."""

    room: str
    request_id: str
    requester: str
    held_from: int | None = None  # the requester's (None: an older peer that does not say)
    repair: bool = False  # the requester gave a hole up; answer only with a complete memory


@attrs.frozen
class SnapshotSeen:
    """``sender`` sent the last piece of a snapshot in ``room`` (to anyone)."""

    room: str
    sender: str


@attrs.frozen
class WatchOwn:
    """Tell the sender of ``op_id`` its outcome once the relay sequences it."""

    room: str
    op_id: str


@attrs.frozen
class Probed:
    """These rooms were probed at start (by :func:`probe`); later joins are probed by the actor."""

    rooms: tuple[str, ...]


@attrs.frozen
class Resumed:
    """The relay link is up again: per room, the oldest seq the relay still holds."""

    firsts: tuple[tuple[str, int], ...]


MemorySyncInput = Nudge | Answer | SnapshotSeen | WatchOwn | Probed | Resumed


@attrs.frozen
class StoreView:
    """What the core is told of the store: rooms we are in, those with a hole, and those whose
    memory gave ops up and journals, with the ops journaled (one read, so they agree)."""

    joined: tuple[str, ...]
    stalled: tuple[str, ...]
    repairing: tuple[tuple[str, int], ...]


class SyncStore(Protocol):
    """What the actor reads and writes; the real one is
    :class:`crosstalk.actors.memory_sync_store.StoreAdapter`."""

    async def rooms(self) -> list[str]: ...

    async def view(self) -> StoreView: ...

    async def members(self, room: str) -> list[str]:
        """The room's joined members (not those only invited), ourselves included."""

    async def inviter(self, room: str) -> str | None:
        """Who added us to the room (None: we made it, or it is not known)."""

    async def cursor(self, room: str) -> MemoryCursor: ...

    async def ours(self, room: str) -> OurMemory:
        """Whether our memory of the room has a hole, where it ends, and whether it conceded."""

    async def received_through(self, room: str) -> int:
        """The seq through which we hold the room's log: committed by the link (applied or
        not), or reached by a memory snapshot."""
        ...

    async def note_request(self, room: str, request_id: str, asked: str | None) -> None: ...

    async def snapshot(self, room: str) -> tuple[MemorySnapshot, bool] | None:
        """The room's memory and whether it gave a hole up; None while it has a hole."""

    async def drop_journal(self, room: str) -> None: ...

    async def advance(self, room: str) -> None: ...

    async def held_from(self, room: str) -> int | None:
        """The first seq after the room's hole we hold; None without a hole."""

    async def concede(self, room: str) -> None:
        """Give up the room's hole: apply what we hold after it (see memory_log)."""

    async def unreported(self) -> list[tuple[str, str, str]]: ...

    async def outcome(self, room: str, op_id: str) -> Outcome | None: ...

    async def mark_reported(self, op_id: str) -> None: ...
