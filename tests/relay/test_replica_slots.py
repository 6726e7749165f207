"""A slot reloaded on a relay node (sans-IO): what reached the node only through the reload is
sent to the sides attached here. The stored messages a reload takes in are never fed again, so
a part missing here would leave its reader waiting forever (the cause of the intermittent
``room join`` timeout between daemons on two nodes)."""

from __future__ import annotations

from crosstalk.wire import relay as w
from relay.effects import Effect, Send
from relay.replica import replace_unit
from relay.rooms import RoomBook
from relay.slots import SlotTable
from relay.storage import (
    MemoryStorage,
    Peer,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    Write,
)

OWNER = Peer("owner-fp", b"o" * 32, b"O" * 32)
JOINER = Peer("joiner-fp", b"j" * 32, b"J" * 32)
OTHER = Peer("other-fp", b"x" * 32, b"X" * 32)
EXPIRES = 900.0
OWNER_CONN, JOINER_CONN = 1, 2


def _stored(writes: list[Write]) -> MemoryStorage:
    storage = MemoryStorage()
    storage.commit(writes)
    return storage


def _cached(writes: list[Write]) -> SlotTable:
    """This node's table as of ``writes``, with both sides attached here."""
    table = SlotTable(ttl=EXPIRES, grant_ttl=EXPIRES, max_open=3)
    table.load(_stored(writes).load())
    slot = table.slots["4509"]
    slot.attached["owner"].add(OWNER_CONN)
    slot.attached["joiner"].add(JOINER_CONN)
    return table


def _reload(table: SlotTable, stored: list[Write]) -> list[Effect]:
    out: list[Effect] = []

    def nobody(*_: object) -> None:
        raise AssertionError("a slot reload pushes nothing to rooms")

    replace_unit(RoomBook(), table, "slot.4509", _stored(stored).load(), nobody, nobody,
                 nobody, out)
    return out


OPENED: list[Write] = [SlotOpened("4509", OWNER, EXPIRES)]


def test_parts_and_join_that_came_only_through_the_reload_are_sent() -> None:
    # The node saw the opening and the owner's part 0; the joiner's join and parts 0 and 1
    # reached it only through the reload (its own write lost the compare-and-set to them).
    cache = [*OPENED, SlotPartPut("4509", "owner", 0, b"o0")]
    table = _cached(cache)
    out = _reload(table, [*cache, SlotFilled("4509", JOINER), SlotPartPut("4509", "joiner", 0,
                  b"j0"), SlotPartPut("4509", "joiner", 1, b"j1")])
    assert out == [
        Send(OWNER_CONN, w.SlotJoined(None, "4509", JOINER.fingerprint, JOINER.ed_pub,
                                      JOINER.x_pub)),
        Send(OWNER_CONN, w.SlotMsg("4509", "joiner", 0, b"j0")),
        Send(OWNER_CONN, w.SlotMsg("4509", "joiner", 1, b"j1")),
    ]
    assert table.slots["4509"].attached["owner"] == {OWNER_CONN}


def test_what_the_node_had_already_is_not_sent_again() -> None:
    cache = [*OPENED, SlotFilled("4509", JOINER), SlotPartPut("4509", "joiner", 0, b"j0")]
    table = _cached(cache)
    table.slots["4509"].parts[("owner", 1)] = b"undecided"  # this node's write that lost
    out = _reload(table, [*cache, SlotPartPut("4509", "joiner", 1, b"j1")])
    assert out == [Send(OWNER_CONN, w.SlotMsg("4509", "joiner", 1, b"j1"))]
    assert ("owner", 1) not in table.slots["4509"].parts


def test_a_slot_closed_elsewhere_is_closed_here() -> None:
    cache = [*OPENED, SlotFilled("4509", JOINER)]
    out = _reload(_cached(cache), [*cache, SlotRemoved("4509")])
    closed = w.SlotClosed("4509", "closed")
    assert sorted(out, key=repr) == sorted([Send(OWNER_CONN, closed), Send(JOINER_CONN, closed)],
                                           key=repr)


def test_another_opening_under_the_number_is_not_this_nodes_slot() -> None:
    table = _cached(OPENED)  # this node's own opening, which lost to another node's
    out = _reload(table, [SlotOpened("4509", OTHER, EXPIRES + 1)])
    assert out == []
    assert table.slots["4509"].owner == OTHER
    assert table.slots["4509"].attached == {"owner": set(), "joiner": set()}


def test_the_unit_of_a_stored_subject_agrees_with_decoding() -> None:
    """A node skips its own writes' echoes by subject alone: the unit must be the decoded one."""
    from relay.nats_layout import Layout

    lay = Layout("N")
    for subject, unit in [("N.s.r.abc.m", "r.abc"), ("N.s.r.abc.o", "r.abc"),
                          ("N.s.slot.1234", "slot.1234"), ("N.s.grant.a.b", "grant.a.b"),
                          ("N.s.c.abc.fp.dev", None), ("N.s.d.fp.dev", None),
                          ("N.s.f.abc", None), ("N.s.key", None), ("X.s.r.abc.m", None)]:
        assert lay.unit_of_subject(subject) == unit, subject
