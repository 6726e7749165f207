"""Room membership requests on the relay: create, add, accept, decline, leave, remove, and the
roster and room list a member asks for. Each validates before it mutates (a refusal leaves no
trace but its error frame), appends its writes before its answer, and pushes the new roster to
every joined member; presence is exchanged when people newly share a room.

:class:`MemberDesk` is owned by :class:`~relay.core.RelayCore`, which routes these frames to it
and lends it its pushes (to every connection of an identity) and its presence introductions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from crosstalk.crypto import fingerprint
from crosstalk.wire import relay as w
from relay.conn import Conn, verify_member
from relay.effects import Effect, Send
from relay.rooms import RoomBook, RoomState, check_id, refuse
from relay.slots import PairingDesk

Push = Callable[[Iterable[str], w.RelayFrame, list[Effect]], None]
Introduce = Callable[[str, Iterable[str], list[Effect]], None]


class MemberDesk:
    """The membership requests; frames come in already authenticated (``c`` is READY)."""

    def __init__(
        self, rooms: RoomBook, pairing: PairingDesk, *, push: Push, introduce: Introduce
    ) -> None:
        self._rooms = rooms
        self._pairing = pairing
        self._push = push
        self._introduce = introduce

    def _push_roster(self, state: RoomState, out: list[Effect]) -> None:
        frame = w.Roster(None, state.room, state.roster())
        self._push(state.joined(), frame, out)

    def create(self, c: Conn, f: w.Create, now: float, out: list[Effect]) -> None:
        assert c.peer is not None
        check_id(f.room, "room")
        verify_member(c.peer.ed_pub, f.room, c.peer.ed_pub, c.peer.x_pub, f.sig)
        member = w.Member(c.fp, c.peer.ed_pub, c.peer.x_pub, "joined", c.fp, f.sig)
        state, writes = self._rooms.create(f.room, member)
        out.extend(writes)
        out.append(Send(c.id, w.Ok(f.req)))
        self._push_roster(state, out)

    def add(self, c: Conn, f: w.Add, now: float, out: list[Effect]) -> None:
        assert c.peer is not None
        state = self._rooms.require_joined(f.room, c.fp)
        if len(f.ed_pub) != 32 or len(f.x_pub) != 32:
            raise refuse("bad_frame", "ed_pub and x_pub must be 32 bytes")
        verify_member(c.peer.ed_pub, f.room, f.ed_pub, f.x_pub, f.sig)
        invitee = fingerprint(f.ed_pub)
        if invitee in state.members:
            raise refuse("already_member", "that person is already in the room's roster")
        # The grant's spending is written after the room's change: on a relay node the room's
        # write may lose its compare-and-set, and a grant already spent then would refuse the
        # retry as forbidden (the node settles a grant write that loses after the room won).
        spent: list[Effect] = []
        if invitee not in self._rooms.peers(c.fp) and not self._pairing.spend_grant(
            c.fp, invitee, now, spent
        ):
            raise refuse("forbidden", "you can only add someone you already share a room with")
        member = w.Member(invitee, f.ed_pub, f.x_pub, "invited", c.fp, f.sig)
        out.extend(self._rooms.add(state, member))
        out.extend(spent)
        out.append(Send(c.id, w.Ok(f.req)))
        self._push_roster(state, out)
        self._push([invitee], w.Invited(f.room, c.fp), out)

    def accept(self, c: Conn, f: w.Accept, now: float, out: list[Effect]) -> None:
        before = self._rooms.peers(c.fp)
        state, writes = self._rooms.accept(f.room, c.fp)
        out.extend(writes)
        out.append(Send(c.id, w.Ok(f.req)))
        self._push_roster(state, out)
        self._introduce(c.fp, sorted(self._rooms.peers(c.fp) - before), out)

    def decline(self, c: Conn, f: w.Decline, now: float, out: list[Effect]) -> None:
        state = self._rooms.get(f.room) if f.room in self._rooms.rooms else None
        _, writes = self._rooms.decline(f.room, c.fp)
        out.extend(writes)
        out.append(Send(c.id, w.Ok(f.req)))
        if state is not None:
            self._after_drop(state, c.fp, "declined", out)

    def leave(self, c: Conn, f: w.Leave, now: float, out: list[Effect]) -> None:
        state = self._rooms.require_joined(f.room, c.fp)
        out.extend(self._rooms.drop_member(state, c.fp))
        out.append(Send(c.id, w.Ok(f.req)))
        self._after_drop(state, c.fp, "left", out)

    def remove(self, c: Conn, f: w.Remove, now: float, out: list[Effect]) -> None:
        state = self._rooms.require_joined(f.room, c.fp)
        if f.fingerprint == c.fp:
            raise refuse("bad_frame", "to take yourself out of a room, leave it")
        if f.fingerprint not in state.members:
            raise refuse("not_a_member", "that person is not in the room")
        out.extend(self._rooms.drop_member(state, f.fingerprint))
        out.append(Send(c.id, w.Ok(f.req)))
        self._after_drop(state, f.fingerprint, "removed", out, by=c.fp)

    def _after_drop(
        self, state: RoomState, gone: str, reason: str, out: list[Effect], *, by: str | None = None
    ) -> None:
        self._push([gone], w.RoomGone(state.room, reason, by), out)
        if state.room in self._rooms.rooms:
            self._push_roster(state, out)
        else:  # the last joined member went: pending invitations die with the room
            self._push(list(state.members), w.RoomGone(state.room, "deleted"), out)
            state.members.clear()

    def roster(self, c: Conn, f: w.GetRoster, now: float, out: list[Effect]) -> None:
        state = self._rooms.get(f.room)
        if c.fp not in state.members:
            raise refuse("not_a_member", f"you are not in room {f.room!r}")
        out.append(Send(c.id, w.Roster(f.req, f.room, state.roster())))

    def list_rooms(self, c: Conn, f: w.ListRooms, now: float, out: list[Effect]) -> None:
        entries = [
            w.RoomEntry(room, self._rooms.rooms[room].members[c.fp].state)
            for room in sorted(self._rooms.member_of.get(c.fp, ()))
        ]
        out.append(Send(c.id, w.RoomList(f.req, entries)))
