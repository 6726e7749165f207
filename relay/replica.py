"""Keeping a node's relay core in step with what other nodes stored (sans-IO).

Theory of operation
-------------------
On a stateless node (:mod:`relay.node`) the core's rooms, slots and grants are a cache of the
stream. A node's own writes reach its core the ordinary way (the handler changes the cache, the
write wins its compare-and-set). Writes of other nodes arrive as stored messages, decoded into
the same :data:`~relay.storage.Write` records; :func:`apply_stored` applies them to the cache and
returns the frames this node's own connections must get, the same frames the core sends when it
makes the change itself:

* an op: pushed to every *live* connection here of a joined member (the poster is elsewhere);
* membership: the roster to joined members, ``invited`` to a new invitee, ``room_gone`` to whoever
  left, declined or was removed (``by`` tells who made the change), and ``room_gone deleted`` to
  the rest when the room went with its last joined member; a member who became joined and now
  shares a room with someone new is introduced (presence both ways, for whoever is online), as
  the core does on its own ``accept``;
* a cursor: the cache's cursor moves forward and acknowledged ops are dropped from the cache (the
  writer purged them from the stream); a prune floor drops them too;
* slots: the owner's attached connections here learn of a join, each side's attached connections
  here get the other side's parts, and all get ``slot_closed`` when the slot is closed.

:func:`replace_unit` swaps one unit's cached state for a freshly loaded one (after a lost
compare-and-set, or a gap in what this node saw) and returns what local connections missed: for
a room the ops after the cached head, a changed roster and ``invited`` to a new invitee; for a
slot a join, parts and a close
that came only through the reload (the stored messages it took in are never fed again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from crosstalk.wire import relay as w
from relay.effects import Effect, Send
from relay.rooms import RoomBook, RoomState
from relay.slots import PairingSlot, SlotTable, other
from relay.storage import (
    CursorPut,
    DepartedOps,
    DevicePut,
    GrantDeleted,
    GrantPut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    RoomDeleted,
    RoomPut,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    Snapshot,
    StatementAppended,
    Write,
)

Push = Callable[[Iterable[str], w.RelayFrame, list[Effect]], None]
# introduce(fp, others, out): presence between ``fp`` and each of ``others``, both online.
Introduce = Callable[[str, Iterable[str], list[Effect]], None]


class Gap(Exception):
    """A stored op does not follow the cached head: this node missed something; reload."""


def apply_stored(
    book: RoomBook, table: SlotTable, writes: list[Write], by: str, push: Push,
    push_live: Push, introduce: Introduce, out: list[Effect],
) -> None:
    """Apply another node's stored writes (one message) to the cache; frames go to ``out``."""
    first = writes[0] if writes else None
    if isinstance(first, RoomPut | MemberPut | MemberDeleted | DepartedOps | StatementAppended
                  | RoomDeleted):
        _membership(book, first.room, writes, by, push, introduce, out)
        return
    for x in writes:
        if isinstance(x, OpAppended):
            state = book.rooms.get(x.room)
            if state is None or state.head + 1 != x.op.seq:
                raise Gap(x.room)
            op = book.append(state, x.op.sender, x.op.op_id, x.op.body, x.op.ts)
            push_live(state.joined(), w.Op(x.room, op.seq, op.sender, op.op_id, op.body, op.ts),
                      out)
        elif isinstance(x, CursorPut):
            _cursor(book, x)
        elif isinstance(x, OpsPruned):
            state = book.rooms.get(x.room)
            if state is not None:
                book.drop_through(state, x.through)
        elif isinstance(x, DevicePut):
            book.devices.setdefault(x.fingerprint, set()).add(x.device)
        else:
            _slot(table, x, out)


def _cursor(book: RoomBook, x: CursorPut) -> None:
    state = book.rooms.get(x.room)
    if state is None or x.fingerprint not in state.members:
        return
    book.devices.setdefault(x.fingerprint, set()).add(x.device)
    key = (x.fingerprint, x.device, x.room)
    if x.seq > book.cursors.get(key, -1):
        book.cursors[key] = min(x.seq, state.head)
        book.prune_acknowledged(state)


def _membership(book: RoomBook, room: str, writes: list[Write], by: str, push: Push,
                introduce: Introduce, out: list[Effect]) -> None:
    old = book.rooms.get(room)
    before = dict(old.members) if old is not None else {}
    joining = _joining(book, room, writes)
    for x in writes:
        if isinstance(x, RoomPut):
            if room not in book.rooms:
                book.rooms[room] = RoomState(room)
        elif isinstance(x, MemberPut):
            state = book.rooms[room]
            new = x.member.fingerprint not in state.members
            book.put_member(state, x.member)
            if new and x.member.state == "invited":
                push([x.member.fingerprint], w.Invited(room, x.member.added_by), out)
        elif isinstance(x, MemberDeleted):
            state = book.rooms[room]
            if x.fingerprint in state.members:
                was = state.members[x.fingerprint].state
                book.drop_member(state, x.fingerprint)
                push([x.fingerprint], _gone(room, x.fingerprint, was, by), out)
            else:  # a departed entry past the room's bound
                state.departed.pop(x.fingerprint, None)
        elif isinstance(x, DepartedOps):
            book.keep_departed_ops(book.rooms[room], x.fingerprint, x.ops)
        elif isinstance(x, StatementAppended):
            state = book.rooms[room]
            if x.index == state.history.length:  # else a reload already took it in
                book.record_statement(state, x.stmt)
        elif isinstance(x, RoomDeleted) and room in book.rooms:
            book.delete(book.rooms[room])
    after = book.rooms.get(room)
    if after is not None:
        push(after.joined(), _roster(after, writes), out)
        _introduce_joined(book, joining, introduce, out)
    elif before:  # deleted with its last joined member, who left (or declined)
        if by in before:
            push([by], _gone(room, by, before[by].state, by), out)
        push([fp for fp in before if fp != by], w.RoomGone(room, "deleted"), out)


def _roster(state: RoomState, writes: list[Write]) -> w.Roster:
    """The roster push for another node's change, with the statements it added (with none, its
    ``chain_from`` still says how long the history is, so a member behind it fetches)."""
    added = [x for x in writes if isinstance(x, StatementAppended)]
    start = added[0].index if added else state.history.length
    named = {x.member.fingerprint for x in writes if isinstance(x, MemberPut)}
    named.update(fp for x in added for fp in (x.stmt.actor, x.stmt.subject))
    return w.Roster(None, state.room, state.rows_of(named), [x.stmt for x in added], start)


def _joining(book: RoomBook, room: str, writes: list[Write]) -> dict[str, set[str]]:
    """Members ``writes`` make joined who were not, each with the peers they had before."""
    state = book.rooms.get(room)
    out: dict[str, set[str]] = {}
    for x in writes:
        if not isinstance(x, MemberPut) or x.member.state != "joined":
            continue
        fp = x.member.fingerprint
        was = state.members.get(fp) if state is not None else None
        if was is None or was.state != "joined":
            out[fp] = book.peers(fp)
    return out


def _introduce_joined(book: RoomBook, joining: dict[str, set[str]], introduce: Introduce,
                      out: list[Effect]) -> None:
    for fp, before in joining.items():
        introduce(fp, sorted(book.peers(fp) - before), out)


def _gone(room: str, fp: str, was: str, by: str) -> w.RoomGone:
    if fp != by:
        return w.RoomGone(room, "removed", by)
    return w.RoomGone(room, "left" if was == "joined" else "declined")


def _slot(table: SlotTable, x: Write, out: list[Effect]) -> None:
    if isinstance(x, SlotOpened):
        table.forget(x.number)
        table.put(x.number, x.owner, x.expires_at)
        return
    if isinstance(x, GrantPut):
        table.grants[(x.a, x.b)] = x.expires_at
        return
    if isinstance(x, GrantDeleted):
        table.grants.pop((x.a, x.b), None)
        return
    if not isinstance(x, SlotFilled | SlotPartPut | SlotRemoved):
        return
    slot = table.slots.get(x.number)
    if slot is None:
        return
    if isinstance(x, SlotFilled):
        slot.joiner = x.joiner
        j = x.joiner
        frame = w.SlotJoined(None, slot.number, j.fingerprint, j.ed_pub, j.x_pub)
        out.extend(Send(cid, frame) for cid in slot.attached["owner"])
    elif isinstance(x, SlotPartPut):
        slot.parts[(x.side, x.index)] = x.data
        msg = w.SlotMsg(slot.number, x.side, x.index, x.data)
        out.extend(Send(cid, msg) for cid in slot.attached[other(x.side)])
    else:
        table.forget(x.number)
        closed = w.SlotClosed(slot.number, "closed")
        for conns in slot.attached.values():
            out.extend(Send(cid, closed) for cid in conns)


def replace_unit(
    book: RoomBook, table: SlotTable, unit: str, snapshot: Snapshot, push: Push, push_live: Push,
    introduce: Introduce, out: list[Effect],
) -> None:
    """Swap the cached state of ``unit`` for ``snapshot`` (its freshly loaded state)."""
    kind, _, key = unit.partition(".")
    if kind == "r":
        old = book.rooms.get(key)
        head = old.head if old is not None else 0
        # The cache may hold this node's own undecided op (a post that lost its compare-and-set)
        # at a seq another node's op now has: an op is new here unless the cache held it.
        held = {op.seq: op.op_id for op in old.log} if old is not None else {}
        low = min(held, default=head + 1) - 1
        members = dict(old.members) if old is not None else {}
        record = next((r for r in snapshot.rooms if r.room == key), None)
        joining = _joining(book, key, [MemberPut(key, m) for m in record.members]
                           if record is not None else [])
        if old is not None:
            book.delete(old)
        book.load(snapshot)
        state = book.rooms.get(key)
        if state is None:
            return
        for op in state.after(low):  # what this node's connections missed
            if op.seq <= head and held.get(op.seq) == op.op_id:
                continue
            push_live(state.joined(), w.Op(key, op.seq, op.sender, op.op_id, op.body, op.ts),
                      out)
        if state.members != members:
            push(state.joined(), _roster(state, []), out)
        for fp, member in state.members.items():  # invited meanwhile (the usual way a node
            if fp not in members and member.state == "invited":  # hears of a room it does not
                push([fp], w.Invited(key, member.added_by), out)  # follow: by a reload)
        _introduce_joined(book, joining, introduce, out)
    elif kind == "slot":
        slot = table.slots.get(key)
        table.forget(key)
        table.load(snapshot)
        fresh = table.slots.get(key)
        if slot is not None:
            _slot_missed(slot, fresh, out)
    else:
        a, _, b = key.partition(".")
        table.grants.pop((a, b), None)
        table.load(snapshot)


def _slot_missed(old: PairingSlot, fresh: PairingSlot | None, out: list[Effect]) -> None:
    """What the connections attached to ``old`` here have not been told of ``fresh``: stored
    messages a reload took in are never fed again, so a join or part that reached this node only
    through the reload (say the other side's part that made this node's own write lose its
    compare-and-set) is sent from here, or the side waiting for it waits forever. Parts are
    write-once, so a part already cached was sent when it came. ``old`` may hold this node's own
    undecided write; at worst a side hears of a join twice, as it does when it attaches again.
    An ``old`` that is only this node's undecided ``open`` (lost to another open under the
    number, or to a close of the slot that had it) is no one's slot yet: nothing is sent."""
    if fresh is None:
        if old.joiner is not None or old.parts:
            closed = w.SlotClosed(old.number, "closed")
            for conns in old.attached.values():
                out.extend(Send(cid, closed) for cid in conns)
        return
    if (fresh.owner, fresh.expires_at) != (old.owner, old.expires_at):
        return  # another opening under the number: the connections here are not its sides
    fresh.attached = old.attached
    j = fresh.joiner
    if j is not None and j != old.joiner:
        joined = w.SlotJoined(None, fresh.number, j.fingerprint, j.ed_pub, j.x_pub)
        out.extend(Send(cid, joined) for cid in fresh.attached["owner"])
    for (side, index), data in sorted(fresh.parts.items()):
        if (side, index) not in old.parts:
            msg = w.SlotMsg(fresh.number, side, index, data)
            out.extend(Send(cid, msg) for cid in fresh.attached[other(side)])
