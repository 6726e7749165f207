"""One room's state at the relay: its roster, its log and its membership history (sans-IO).

:class:`~relay.rooms.RoomBook` owns every room's :class:`RoomState` and the rules that change
them (see that module's theory of operation); this is the state itself and the reads of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import attrs

from crosstalk.wire.chain import ChainState, Statement
from crosstalk.wire.relay import Member
from relay.storage import StoredOp


@attrs.define
class RoomState:
    room: str
    head: int = 0
    members: dict[str, Member] = attrs.Factory(dict)
    log: deque[StoredOp] = attrs.Factory(deque)
    op_ids: dict[str, int] = attrs.Factory(dict)  # op_id -> seq, for ops still held
    log_bytes: int = 0
    departed: dict[str, Member] = attrs.Factory(dict)  # state "left", oldest first
    # fingerprint -> op id -> seq: what a departed member posted and had not acknowledged
    departed_ops: dict[str, dict[str, int]] = attrs.Factory(dict)
    # The membership history members believe (the rows above are the relay's own view of it).
    history: ChainState = attrs.Factory(lambda self: ChainState(self.room), takes_self=True)
    statements: list[Statement] = attrs.Factory(list)
    # Devices of joined members whose cursor is before the first held op (None: not counted
    # since the last change but an acknowledgement). Only when it reaches 0 can an ack prune.
    holding: int | None = None

    def joined(self) -> list[str]:
        return [fp for fp, m in self.members.items() if m.state == "joined"]

    def roster(self) -> list[Member]:
        """What ``roster`` says: the members, then the departed."""
        return [*self.members.values(), *self.departed.values()]

    def rows_of(self, fingerprints: Iterable[str]) -> list[Member]:
        """The roster's rows for ``fingerprints`` (members, then departed; unknown ones left out):
        what a push about a change carries, so a push stays the size of the change."""
        wanted = set(fingerprints)
        return [m for m in self.roster() if m.fingerprint in wanted]

    def first(self) -> int:
        """The oldest seq still held (head + 1 when the log is empty)."""
        return self.log[0].seq if self.log else self.head + 1

    def after(self, seq: int) -> Iterator[StoredOp]:
        """The held ops with seq > ``seq``, in order."""
        start = max(0, seq + 1 - self.first())
        for i in range(start, len(self.log)):
            yield self.log[i]


__all__ = ["RoomState"]
