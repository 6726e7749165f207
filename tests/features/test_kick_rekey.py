"""A kick's rekey moves the room to the new epoch in the same commit as the Rekey post.

The simulation's seed 127 (under another schedule): the remover posted the Rekey, and moved
its room to the new epoch in a later commit; a joiner who had accepted after the Rekey was
sequenced (so it never receives it) named itself under the old epoch in between, and the
remover, still at the old epoch when it applied that name, owed it no key share. The joiner held
every op of the new epoch for ever.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from crosstalk import crypto
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.features.membership.keys import share_with_stranded
from crosstalk.features.rooms import kick
from crosstalk.store.db import Store, open_store
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room, get_room
from crosstalk.wire.room_ops import Rekey, RoomInvite, RoomOp

ROOM = "r" * 32
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
CY = crypto.Keys(b"\x05" * 32, b"\x06" * 32)


class _Remover:
    """The daemon as a kick's rekey sees it; posts are recorded, their ``also`` not committed."""

    def __init__(self, store: Store) -> None:
        self.store, self.keys, self.membership = store, ME, None
        self.posted: list[tuple[RoomOp, OutboxWrite | None]] = []

    async def send_op(self, room_id: str, op: RoomOp, *, also: OutboxWrite | None = None,
                      **_: Any) -> str:
        self.posted.append((op, also))
        return "op"


async def test_the_rekey_post_carries_the_move_to_the_new_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def roster_as_it_is(*_: object, **__: object) -> bool:
        return True

    monkeypatch.setattr(kick, "fetch_roster", roster_as_it_is)
    async with open_store(tmp_path / "state.db") as store:
        def room(conn: sqlite3.Connection) -> None:
            add_room(conn, Room(ROOM, "team", "shared", "joined", 0, 0.0), b"0" * 32)
            for who, label in ((ME, "me"), (BEN, "ben"), (CY, "cy")):
                add_member(conn, RoomMember(ROOM, who.fingerprint, label, who.ed_pub, who.x_pub,
                                            "member", ME.fingerprint))

        await store.write(room)
        daemon = _Remover(store)
        epoch = await kick._rekey(daemon, object(), ROOM, CY.fingerprint)  # type: ignore[arg-type]
        [(op, also)] = [(op, also) for op, also in daemon.posted if isinstance(op, Rekey)]
        assert isinstance(op, Rekey) and (op.epoch, epoch) == (1, 1)
        # Nothing moved outside the post's commit ...
        assert (await store.read(lambda c: get_room(c, ROOM))).epoch == 0
        assert also is not None
        await store.write(also)
        # ... and the post's commit moves the room.
        assert (await store.read(lambda c: get_room(c, ROOM))).epoch == 1


@pytest.mark.parametrize("plant", [False, True])
async def test_the_member_a_rekey_removed_gets_no_key_share_though_listed_again(
    tmp_path: Path, plant: bool
) -> None:
    """We added Ben and Cy; the rekey removed Cy, but the roster lists Cy again as invited (by
    us, as the relay says): the rekey's share goes to Ben, still invited, never to Cy, who gets
    the newer keys by joining if the invitation is real. The planted bug names nobody removed:
    Cy is sent the current key."""
    directs = {BEN.fingerprint: "b" * 32, CY.fingerprint: "c" * 32}
    async with open_store(tmp_path / "state.db") as store:
        def rooms(conn: sqlite3.Connection) -> None:
            add_room(conn, Room(ROOM, "team", "shared", "joined", 1, 0.0), b"1" * 32)
            add_member(conn, RoomMember(ROOM, ME.fingerprint, "me", ME.ed_pub, ME.x_pub,
                                        "member", ME.fingerprint))
            for who, label in ((BEN, "ben"), (CY, "cy")):
                add_member(conn, RoomMember(ROOM, who.fingerprint, label, who.ed_pub, who.x_pub,
                                            "invited", ME.fingerprint))
                direct = directs[who.fingerprint]
                add_room(conn, Room(direct, label, "direct", "joined", 0, 0.0), b"d" * 32)
                add_member(conn, RoomMember(direct, who.fingerprint, label, who.ed_pub,
                                            who.x_pub))

        await store.write(rooms)
        sent_to: list[str] = []

        async def send_op(room_id: str, op: RoomOp) -> str:
            assert isinstance(op, RoomInvite) and op.room_id == ROOM and op.epoch == 1
            sent_to.append(room_id)
            return "op"

        await share_with_stranded(store, send_op, ROOM, ME.fingerprint, {},
                                  "" if plant else CY.fingerprint)
    told = {fp for fp, direct in directs.items() if direct in sent_to}
    assert told == ({BEN.fingerprint, CY.fingerprint} if plant else {BEN.fingerprint})
