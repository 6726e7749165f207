"""Newer room keys owed to a joiner are durable: noted in the transaction that applies its
``MemberNamed``, cleared with the last share's outbox commit (the simulation's seed 297: the one
member holding the new key crashed right after applying the joiner's name, the share was never
sent, and the joiner held every later op for ever)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crosstalk import crypto
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError, NotAMember
from crosstalk.features.membership.key_share import owe_shares, send_owed
from crosstalk.features.membership.keys import key_context
from crosstalk.features.rooms.appliers import key_listener
from crosstalk.store import membership as mq
from crosstalk.store import room_keys
from crosstalk.store.db import Store, open_store
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire.room_ops import KeyShare, MemberNamed, RoomOp

ROOM = "r" * 32
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
CY = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
KEYS = {0: b"0" * 32, 1: b"1" * 32, 2: b"2" * 32}


def _room(conn: sqlite3.Connection) -> None:
    """We hold epochs 0-2; Cy joined with the invitation's key of epoch 0."""
    add_room(conn, Room(ROOM, "team", "shared", "joined", 2, 0.0), KEYS[2])
    for epoch in (0, 1):
        room_keys.take_key(conn, ROOM, epoch, KEYS[epoch])
    for who, label in ((ME, "me"), (CY, "cy")):
        add_member(conn, RoomMember(ROOM, who.fingerprint, label, who.ed_pub, who.x_pub,
                                    "member", ME.fingerprint))


def named(who: crypto.Keys, epoch: int) -> Applied:
    return Applied(ROOM, 5, "op-5", who.fingerprint, 0.0, MemberNamed({who.fingerprint: "x"}),
                   epoch)


class Posts:
    """``send_op`` as the daemon's: commits ``also`` with the post; ``refuse`` raises instead."""

    def __init__(self, store: Store, refuse: CrosstalkError | None = None) -> None:
        self.store, self.refuse = store, refuse
        self.sent: list[tuple[RoomOp, int | None]] = []

    async def __call__(
        self, room_id: str, op: RoomOp, *, epoch: int | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((op, epoch))
        if also is not None:
            await self.store.write(also)
        return "op"


@pytest.mark.parametrize(
    ("who", "epoch", "owed"),
    [(CY, 0, [(ROOM, CY.fingerprint, 0)]), (CY, 2, []), (ME, 0, [])],
    ids=["behind", "up to date", "ourselves"],
)
async def test_a_joiner_naming_itself_under_an_older_epoch_is_owed_the_newer_keys(
    tmp_path: Path, who: crypto.Keys, epoch: int, owed: list[tuple[str, str, int]]
) -> None:
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room)
        await store.write(lambda conn: owe_shares(conn, named(who, epoch), ME.fingerprint))
        assert await store.read(mq.key_shares_owed) == owed


async def test_what_is_owed_is_sent_under_the_joiners_epoch_and_then_cleared(
    tmp_path: Path,
) -> None:
    """A debt left by a crash (written, never sent) goes out at the next send_owed: a share for
    each newer epoch, sealed to Cy, posted under Cy's epoch; then nothing is owed."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room)
        await store.write(lambda conn: owe_shares(conn, named(CY, 0), ME.fingerprint))
        posts = Posts(store)
        await send_owed(store, posts)
        shares = [(op.epoch, epoch) for op, epoch in posts.sent if isinstance(op, KeyShare)]
        assert shares == [(1, 0), (2, 0)] and len(posts.sent) == 2
        for op, _ in posts.sent:
            assert isinstance(op, KeyShare)
            sealed = op.sealed[CY.fingerprint]
            opened = crypto.open_sealed(CY, sealed, context=key_context(ROOM, op.epoch))
            assert opened == KEYS[op.epoch]
        assert await store.read(mq.key_shares_owed) == []
        await send_owed(store, posts)
        assert len(posts.sent) == 2  # paid once


async def test_a_debt_we_can_no_longer_pay_is_dropped(tmp_path: Path) -> None:
    """Removed from the room since: the shares cannot be posted, and nothing stays owed."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room)
        await store.write(lambda conn: owe_shares(conn, named(CY, 0), ME.fingerprint))
        await send_owed(store, Posts(store, refuse=NotAMember("You were removed from #team.")))
        assert await store.read(mq.key_shares_owed) == []


class _Removed:
    """The daemon as the rooms' key listener sees it, after we were removed from ROOM."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.keys = ME

    async def send_op(self, room_id: str, op: RoomOp, **_: object) -> str:
        raise NotAMember("You were removed from #team.")


async def test_a_listener_whose_answer_is_refused_does_not_take_the_fan_out_down(
    tmp_path: Path,
) -> None:
    """We welcome a member we added by name; removed meanwhile, sending raises NotAMember,
    which used to escape the listener and crash the fan-out actor (sim seed 297)."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room)
        daemon = _Removed(store)
        # The fake has only the store, keys and send_op.
        await key_listener(daemon, [named(CY, 2)])  # type: ignore[arg-type]  # logged, not raised
