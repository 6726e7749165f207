"""The relay link's cursors: resume from them, take inbound ops past them, acknowledge commits.

Theory of operation
-------------------
A cursor is, per room, the highest seq committed here. One :class:`Resume` per link::

    IDLE -start-> AWAIT_RESUMED -resumed-> DONE;   any state -lost-> IDLE

* ``start`` (the handshake is done) sends ``resume`` with every cursor; the relay replays what
  follows each one, then answers ``resumed``. Rooms the relay calls ``missing`` are no longer ours
  and lose their cursors (:class:`~crosstalk.core.link.events.RoomLeft`).
* Nothing is acknowledged before it is committed. An inbound op past the cursor becomes
  :class:`~crosstalk.core.link.events.OpArrived`; its ``ack`` is made only by ``committed``,
  which the shell calls once the op and its cursor are in the store. An op at or below the
  cursor is committed already: it is acknowledged again at once and not reported.
* An op reported but not yet committed is not reported twice: a replay of it (the relay resends
  what follows the committed cursor after a reconnect) is ignored, and the ``ack`` follows the
  commit on whatever connection is up by then.
* Cursors appear for rooms we create or accept (``joined``, at 0) and go with ``left``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from crosstalk import sim_hooks
from crosstalk.core.link.common import next_state
from crosstalk.core.link.events import OpArrived, RoomJoined, RoomLeft
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire import relay as w


class ResumeState(enum.Enum):
    IDLE = "idle"
    AWAIT_RESUMED = "awaiting resumed"
    DONE = "done"
    ERROR = "error"


class Resume:
    """Cursors, resume and acknowledgements (see the module docstring).

    Args:
        cursors: each room's durable cursor, as loaded from the store.
    """

    def __init__(self, cursors: Mapping[str, int]) -> None:
        self._cursors = dict(cursors)
        self._arrived: dict[str, int] = {}  # room -> highest seq reported, maybe not committed
        self._req: int | None = None
        self._state = ResumeState.IDLE

    @property
    def state(self) -> ResumeState:
        return self._state

    @property
    def cursors(self) -> dict[str, int]:
        return dict(self._cursors)

    def owns(self, req: int) -> bool:
        """Whether ``req`` is the resume this machine is waiting to hear answered."""
        return self._state is ResumeState.AWAIT_RESUMED and req == self._req

    def start(self, req: int) -> w.Resume:
        """Authenticated: the ``resume`` frame to send (with ``req``)."""
        self._move("start")
        self._req = req
        return w.Resume(req, dict(self._cursors))

    def resumed(self, frame: w.RelayFrame) -> list[RoomLeft]:
        """The answer to our resume; the rooms it says are missing are left.

        Raises:
            RemoteProtocolError: the relay refused resume or answered it with something else.
        """
        if isinstance(frame, w.Error):
            raise RemoteProtocolError(f"the relay refused resume ({frame.code}): {frame.message}")
        if not isinstance(frame, w.Resumed):
            raise RemoteProtocolError(f"the relay answered resume with {w.tag_of(frame)}")
        self._move("resumed")
        return [left for room in frame.missing if (left := self.left(room)) is not None]

    def lost(self) -> None:
        self._move("lost")
        self._req = None

    def op_received(self, op: w.Op) -> w.Ack | OpArrived | None:
        """An inbound op: acknowledge it again, report it, or (on its way already) nothing."""
        if op.seq <= self._cursors.get(op.room, 0):
            sim_hooks.probe("link.committed_op_again")
            return w.Ack(op.room, op.seq)  # committed before: safe to acknowledge again
        if op.seq <= self._arrived.get(op.room, 0):
            return None  # reported, its commit is under way; the ack follows the commit
        self._arrived[op.room] = op.seq
        return OpArrived(op)

    def committed(self, room: str, seq: int) -> w.Ack:
        """``room``'s op ``seq`` and its cursor are committed: the cursor moves; the ack."""
        self._cursors[room] = max(seq, self._cursors.get(room, 0))
        return w.Ack(room, seq)

    def joined(self, room: str) -> RoomJoined | None:
        """We created or accepted ``room``: it gets a cursor of 0 (if it had none)."""
        if room in self._cursors:
            return None
        self._cursors[room] = 0
        return RoomJoined(room)

    def left(self, room: str) -> RoomLeft | None:
        """``room`` is no longer ours: its cursor goes (if it had one)."""
        self._arrived.pop(room, None)
        if self._cursors.pop(room, None) is None:
            return None
        return RoomLeft(room)

    def _move(self, happened: str) -> None:
        try:
            self._state = next_state(_TRANSITIONS, self._state, happened, "resume")
        except LocalProtocolError:
            self._state = ResumeState.ERROR
            raise


_S = ResumeState
_LOST = {"lost": _S.IDLE}
_TRANSITIONS: dict[ResumeState, dict[str, ResumeState]] = {
    _S.IDLE: {"start": _S.AWAIT_RESUMED, **_LOST},
    _S.AWAIT_RESUMED: {"resumed": _S.DONE, **_LOST},
    _S.DONE: _LOST,
}
