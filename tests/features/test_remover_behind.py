"""A joiner about to remove someone while its key may be older than the room's newest.

The signed history says whether someone was removed after our invitation; our store says
whether we still hold only the key that invitation brought. Both together mean a newer epoch
exists that we cannot mint from (features/membership/behind.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from crosstalk.features.membership import behind
from crosstalk.store import membership as mq
from crosstalk.store import membership_chain as mc
from crosstalk.store import room_keys
from crosstalk.store.db import open_store
from crosstalk.store.migrations import migrate
from crosstalk.store.rooms import Room, add_room
from crosstalk.wire.chain import Statement

ROOM = "r" * 32
ME, ANA, BEN, CY = "me", "ana", "ben", "cy"


def st(kind: str, actor: str, subject: str) -> Statement:
    return Statement(ROOM, kind, actor, subject)


MADE = [st("create", ANA, ANA), st("invite", ANA, BEN), st("accept", BEN, BEN)]


J = st("accept", ME, ME)  # we join


@pytest.mark.parametrize(("history", "expected"), [
    (MADE, 0),  # never invited: we made the room, or hold nothing of it
    ([*MADE, st("remove", BEN, CY), st("invite", ANA, ME), J], 0),  # removed before we were asked
    ([*MADE, st("invite", ANA, ME), st("remove", BEN, ANA), J], 1),
    ([*MADE, st("invite", ANA, ME), st("remove", BEN, ANA), st("remove", BEN, CY), J], 2),
    ([*MADE, st("invite", ANA, ME), st("remove", BEN, ANA)], 1),  # not accepted yet
    # After we joined, the rekey comes to us like any op.
    ([*MADE, st("invite", ANA, ME), J, st("remove", BEN, ANA)], 0),
    ([*MADE, st("invite", ANA, ME), J, st("remove", ME, BEN)], 0),  # our own removal
    # Invited again: only the newest invitation counts.
    ([*MADE, st("invite", ANA, ME), st("remove", BEN, CY), st("remove", BEN, ME),
      st("invite", ANA, ME), J], 0),
    ([*MADE, st("invite", ANA, ME), st("remove", BEN, ME), st("invite", ANA, ME),
      st("remove", ANA, CY), J], 1),
    ([*MADE, st("invite", ANA, ME), st("leave", ANA, ANA), J], 0),
])
def test_removals_whose_rekey_we_may_not_read(history: list[Statement], expected: int) -> None:
    assert behind.removals_unread(history, ME) == expected


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    yield c
    c.close()


def invited(conn: sqlite3.Connection, epoch: int | None, history: list[Statement]) -> None:
    add_room(conn, Room(ROOM, "team", "shared", "joined", epoch or 0, 0.0), b"k" * 32)
    if epoch is not None:
        mq.invited_through(conn, ROOM, ANA, None, epoch)
    mc.append(conn, ROOM, 0, [(s, bytes([i]) * 32) for i, s in enumerate(history)])


REMOVED_SINCE = [*MADE, st("invite", ANA, ME), st("remove", BEN, ANA), st("accept", ME, ME)]


def test_behind_while_only_the_invitation_key_is_held(conn: sqlite3.Connection) -> None:
    invited(conn, 2, REMOVED_SINCE)
    assert mq.invited_epoch(conn, ROOM) == 2
    assert behind.holds_only_invited_key(conn, ROOM)
    assert behind.epochs_behind(conn, ROOM, ME) == 1
    room_keys.take_key(conn, ROOM, 3, b"n" * 32)  # the share came
    assert not behind.holds_only_invited_key(conn, ROOM)
    assert behind.epochs_behind(conn, ROOM, ME) == 0


def test_never_behind_without_a_removal_before_we_joined(conn: sqlite3.Connection) -> None:
    invited(conn, 0, [*MADE, st("invite", ANA, ME), st("accept", ME, ME), st("remove", BEN, ANA)])
    assert behind.holds_only_invited_key(conn, ROOM)
    assert behind.epochs_behind(conn, ROOM, ME) == 0


def test_a_room_without_a_kept_invitation_is_never_behind(conn: sqlite3.Connection) -> None:
    """We made it, or were invited before the invitation's epoch was kept (migration 30)."""
    invited(conn, None, REMOVED_SINCE)
    assert not behind.holds_only_invited_key(conn, ROOM)
    assert behind.epochs_behind(conn, ROOM, ME) == 0


async def test_the_wait_ends_when_a_newer_key_arrives(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with open_store(tmp_path / "state.db") as store:
        await store.write(lambda c: invited(c, 0, REMOVED_SINCE))

        async def share_later() -> None:
            await trio.sleep(3)
            await store.write(lambda c: room_keys.take_key(c, ROOM, 1, b"n" * 32))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(share_later)
            start = trio.current_time()
            assert await behind.wait_for_newer_key(store, ROOM, ME) == 0
            assert 3 <= trio.current_time() - start < 3 + 2 * behind.KEY_POLL


async def test_the_wait_is_bounded_and_says_how_far_behind(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    async with open_store(tmp_path / "state.db") as store:
        await store.write(lambda c: invited(c, 0, REMOVED_SINCE))
        start = trio.current_time()
        assert await behind.wait_for_newer_key(store, ROOM, ME, within=5.0) == 1
        assert trio.current_time() - start == pytest.approx(5.0, abs=behind.KEY_POLL)


async def test_no_wait_when_not_behind(tmp_path: Path, autojump_clock: trio.abc.Clock) -> None:
    async with open_store(tmp_path / "state.db") as store:
        await store.write(lambda c: invited(c, None, REMOVED_SINCE))
        start = trio.current_time()
        assert await behind.wait_for_newer_key(store, ROOM, ME) == 0
        assert trio.current_time() == start
