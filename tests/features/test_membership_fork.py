"""Forks: a roommate's published sessions carry where their membership history stands; holding
that statement with another link means the relay showed us two different histories."""

from __future__ import annotations

from pathlib import Path

from crosstalk import crypto
from crosstalk.core.room import Applied
from crosstalk.features.membership.ops import compare_histories
from crosstalk.store import membership_chain as mc
from crosstalk.store.db import Store, open_store
from crosstalk.store.rooms import Room, add_room
from crosstalk.wire.room_ops import SessionsPublished
from tests.wire.chain_helpers import History

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
ROOM = "r1"


def told(index: int, link: bytes) -> Applied:
    """Ben's published sessions, saying his history's newest statement is ``index``."""
    op = SessionsPublished((), membership=index, membership_link=link)
    return Applied(ROOM, 9, "op-9", BEN.fingerprint, 100.0, op)


async def holding(store: Store) -> list[bytes]:
    """Our store with the room and its first three statements; returns their links."""
    h = History(ROOM)
    h.do(ANA, "create")
    h.do(ANA, "invite", BEN)
    h.do(BEN, "accept")

    def write(conn) -> None:  # type: ignore[no-untyped-def]
        add_room(conn, Room(ROOM, "r", "shared", "joined", 0, 0.0), b"k" * 32)
        mc.append(conn, ROOM, 0, list(zip(h.statements, h.state.links, strict=True)))

    await store.write(write)
    return list(h.state.links)


async def test_a_roommate_at_another_link_for_a_statement_we_hold_raises_the_fork_alarm(
    tmp_path: Path,
) -> None:
    """Same link: nothing. A head past ours: nothing (news not here yet). Another link at an
    index we hold: the alarm, naming who and where."""
    async with open_store(tmp_path / "state.db") as store:
        links = await holding(store)
        for quiet in (told(2, links[2]), told(1, links[1]), told(7, b"\x00" * 32),
                      told(-1, b"")):
            await store.write(lambda c, a=quiet: compare_histories(c, a))
            assert await store.read(lambda c: mc.alarm(c, ROOM)) is None
        await store.write(lambda c: compare_histories(c, told(1, b"\x05" * 32)))
        alarm = await store.read(lambda c: mc.alarm(c, ROOM))
        assert alarm is not None and BEN.fingerprint[:9] in alarm[1]
        assert "statement 1" in alarm[1]


async def test_a_held_history_is_read_once_and_again_only_when_the_store_moved(
    tmp_path: Path,
) -> None:
    """The actor's cache of each room's history is used while the store's head is the one it
    ends at; a write it did not see (or a rollback) makes it read the store afresh."""
    from crosstalk.features.membership.actor import HeldHistories

    async with open_store(tmp_path / "state.db") as store:
        links = await holding(store)
        cache = HeldHistories()
        first, state = await store.read(lambda c: cache.held(c, ROOM))
        again, same = await store.read(lambda c: cache.held(c, ROOM))
        assert again is first and same is state and len(first) == state.length == 3
        h = History(ROOM)
        h.do(ANA, "create")
        h.do(ANA, "invite", BEN)
        h.do(BEN, "accept")
        extra = h.do(BEN, "leave")
        await store.write(lambda c: mc.append(c, ROOM, 3, [(extra, h.state.links[-1])]))
        fresh, replayed = await store.read(lambda c: cache.held(c, ROOM))
        assert fresh is not first and fresh[-1] == extra and links[-1] == h.state.links[2]
        assert replayed.links == h.state.links
        cache.extended(ROOM, fresh, replayed, ())
        assert (await store.read(lambda c: cache.held(c, ROOM)))[0] is fresh


async def test_a_held_state_extended_by_a_write_that_did_not_commit_is_replayed(
    tmp_path: Path,
) -> None:
    """apply_history extends the cached state in place; if its write then rolls back, the
    state is longer than the history the store holds, and the next push replays afresh."""
    from crosstalk.features.membership.actor import HeldHistories

    async with open_store(tmp_path / "state.db") as store:
        await holding(store)
        cache = HeldHistories()
        held, state = await store.read(lambda c: cache.held(c, ROOM))
        h = History(ROOM)
        h.do(ANA, "create")
        h.do(ANA, "invite", BEN)
        h.do(BEN, "accept")
        state.append(h.do(BEN, "leave"), verify=False)  # the write that did not commit
        again, replayed = await store.read(lambda c: cache.held(c, ROOM))
        assert again is not held and replayed is not state and replayed.length == 3
