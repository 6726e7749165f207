"""Room membership requests on the relay: create, add, accept, decline, leave, remove, and the
roster and room list a member asks for. Each validates before it mutates (a refusal leaves no
trace but its error frame), appends its writes before its answer, and pushes the new roster to
every joined member; presence is exchanged when people newly share a room.

:class:`MemberDesk` is owned by :class:`~relay.core.RelayCore`, which routes these frames to it
and lends it its pushes (to every connection of an identity) and its presence introductions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from crosstalk.crypto import fingerprint
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainRefused, ChainState, Statement
from relay.conn import Conn, verify_member
from relay.effects import Effect, Send
from relay.rooms import RoomBook, RoomState, check_id, refuse
from relay.slots import PairingDesk
from relay.storage import Write

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
        """To every joined member: the statement the change added (the last) and the rows of
        those it names. Only those rows: a member's roster is its verified history's, the rows
        only checked against it, and the whole roster in every push made building a room of
        n members cost n^3 bytes (a member that wants every row asks, ``roster``)."""
        last = state.history.length - 1
        chain = state.statements[last:] if last >= 0 else []
        named = {fp for stmt in chain for fp in (stmt.actor, stmt.subject)}
        frame = w.Roster(None, state.room, state.rows_of(named), chain, max(last, 0))
        self._push(state.joined(), frame, out)

    @staticmethod
    def _check_statement(
        history: ChainState, c: Conn, room: str, stmt: Statement | None, kind: str,
        subject: str,
    ) -> Statement:
        """Refuse a request whose statement is not the requester's own word for this very
        change, or does not follow from the room's history (members would refuse it too)."""
        if stmt is None:
            raise refuse("bad_statement", "a membership change needs the member's signed "
                         "statement of it; upgrade crosstalk")
        if (stmt.room, stmt.kind, stmt.actor, stmt.subject) != (room, kind, c.fp, subject):
            raise refuse("bad_statement", "the statement does not describe this request")
        try:
            history.check(stmt)
        except ChainRefused as exc:
            raise refuse(exc.hint or "bad_statement", exc.message) from None
        return stmt

    def create(self, c: Conn, f: w.Create, now: float, out: list[Effect]) -> None:
        assert c.peer is not None
        check_id(f.room, "room")
        verify_member(c.peer.ed_pub, f.room, c.peer.ed_pub, c.peer.x_pub, f.sig)
        if f.room in self._rooms.rooms:
            raise refuse("room_exists", f"room {f.room!r} already exists; pick another random id")
        stmt = self._check_statement(ChainState(f.room), c, f.room, f.stmt, "create", c.fp)
        member = w.Member(c.fp, c.peer.ed_pub, c.peer.x_pub, "joined", c.fp, f.sig)
        state, writes = self._rooms.create(f.room, member)
        out.extend(writes)
        out.extend(self._rooms.record_statement(state, stmt))
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
        stmt = self._check_statement(state.history, c, f.room, f.stmt, "invite", invitee)
        if (stmt.ed_pub, stmt.x_pub) != (f.ed_pub, f.x_pub):
            raise refuse("bad_statement", "the statement names other keys than the request")
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
        out.extend(self._rooms.record_statement(state, stmt))
        out.extend(spent)
        out.append(Send(c.id, w.Ok(f.req)))
        self._push_roster(state, out)
        self._push([invitee], w.Invited(f.room, c.fp), out)

    def accept(self, c: Conn, f: w.Accept, now: float, out: list[Effect]) -> None:
        before = self._rooms.peers(c.fp)
        invited = self._rooms.invitation(f.room, c.fp)
        stmt = self._check_statement(invited.history, c, f.room, f.stmt, "accept", c.fp)
        state, writes = self._rooms.accept(f.room, c.fp)
        out.extend(writes)
        out.extend(self._rooms.record_statement(state, stmt))
        out.append(Send(c.id, w.Ok(f.req)))
        self._push_roster(state, out)
        self._introduce(c.fp, sorted(self._rooms.peers(c.fp) - before), out)

    def decline(self, c: Conn, f: w.Decline, now: float, out: list[Effect]) -> None:
        state = self._rooms.get(f.room) if f.room in self._rooms.rooms else None
        invited = self._rooms.invitation(f.room, c.fp)
        stmt = self._check_statement(invited.history, c, f.room, f.stmt, "decline", c.fp)
        _, writes = self._rooms.decline(f.room, c.fp)
        out.extend(self._record_unless_deleted(invited, stmt, writes))
        out.append(Send(c.id, w.Ok(f.req)))
        if state is not None:
            self._after_drop(state, c.fp, "declined", out)

    def leave(self, c: Conn, f: w.Leave, now: float, out: list[Effect]) -> None:
        state = self._rooms.require_joined(f.room, c.fp)
        stmt = self._check_statement(state.history, c, f.room, f.stmt, "leave", c.fp)
        writes = self._rooms.drop_member(state, c.fp)
        out.extend(self._record_unless_deleted(state, stmt, writes))
        out.append(Send(c.id, w.Ok(f.req)))
        self._after_drop(state, c.fp, "left", out)

    def remove(self, c: Conn, f: w.Remove, now: float, out: list[Effect]) -> None:
        state = self._rooms.require_joined(f.room, c.fp)
        if f.fingerprint == c.fp:
            raise refuse("bad_frame", "to take yourself out of a room, leave it")
        if f.fingerprint not in state.members:
            raise refuse("not_a_member", "that person is not in the room")
        stmt = self._check_statement(state.history, c, f.room, f.stmt, "remove", f.fingerprint)
        writes = self._rooms.drop_member(state, f.fingerprint)
        out.extend(self._record_unless_deleted(state, stmt, writes))
        out.append(Send(c.id, w.Ok(f.req)))
        self._after_drop(state, f.fingerprint, "removed", out, by=c.fp)

    def _record_unless_deleted(
        self, state: RoomState, stmt: Statement, writes: Sequence[Write]
    ) -> list[Effect]:
        """``writes`` and, unless they deleted the room, the statement that made them."""
        if state.room not in self._rooms.rooms:
            return list(writes)
        return [*writes, *self._rooms.record_statement(state, stmt)]

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
        have = min(max(f.have, 0), state.history.length)
        chain = state.statements[have:]
        out.append(Send(c.id, w.Roster(f.req, f.room, state.roster(), chain, have)))

    def list_rooms(self, c: Conn, f: w.ListRooms, now: float, out: list[Effect]) -> None:
        entries = [
            w.RoomEntry(room, self._rooms.rooms[room].members[c.fp].state)
            for room in sorted(self._rooms.member_of.get(c.fp, ()))
        ]
        out.append(Send(c.id, w.RoomList(f.req, entries)))
