"""A resumed device's rooms, replayed a window at a time.

A device back from a long absence may be owed up to ``max_backlog`` ops in each of its rooms.
Sent at once, that was more than a connection's outbox holds: the shell closed the device as a
slow consumer at every resume, and it got no further than what the socket took before the close.
So a resume sends what a device is owed only up to ``replay_window`` ops beyond what it has
acknowledged, and each acknowledgement sends more (room by room, each in order). While a room's
replay is under way, that connection gets no live pushes of the room: its new ops are in the log
behind the replay, which sends them in turn. A room that finished its replay no longer counts
against the window, so at most about two windows are ever in flight.
"""

from __future__ import annotations

from crosstalk.sim_hooks import probe
from crosstalk.wire import relay as w
from relay.conn import Conn
from relay.effects import Effect, Send
from relay.rooms import RoomBook


def replay_more(c: Conn, book: RoomBook, window: int, out: list[Effect]) -> int:
    """Send ``c`` the next ops of the rooms it is being replayed, up to ``window`` beyond what it
    has acknowledged; returns how many were sent."""
    budget = window - _in_flight(c, book)
    sent = 0
    for room in list(c.replay):
        if budget <= 0:
            break
        state = book.rooms.get(room)
        member = state.members.get(c.fp) if state is not None else None
        if state is None or member is None or member.state != "joined":
            del c.replay[room]  # left or removed meanwhile: nothing more is its to read
            continue
        last, caught_up = c.replay[room], True
        for op in state.after(last):
            if budget <= 0:
                caught_up = False
                break
            out.append(Send(c.id, w.Op(room, op.seq, op.sender, op.op_id, op.body, op.ts)))
            last, budget, sent = op.seq, budget - 1, sent + 1
        # Caught up once the log has nothing after it, even short of the head: retention may
        # have dropped the newest ops (the device repairs that hole from its peers).
        if caught_up:
            del c.replay[room]  # live pushes from now on
        else:
            c.replay[room] = last
    if c.replay:
        probe("relay.replay_paused")  # the rest waits for acknowledgements
    return sent


def _in_flight(c: Conn, book: RoomBook) -> int:
    """Ops replayed to ``c`` and not yet acknowledged, in the rooms still being replayed."""
    cursors = book.cursors
    return sum(max(0, last - cursors.get((c.fp, c.device, room), 0))
               for room, last in c.replay.items())
