"""The inviter's create and add of the room of two when the connection drops under them (sim
seed 270: the room adopted here, never made at the relay, and the joiner left waiting)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from crosstalk import crypto
from crosstalk.errors import RelayUnreachable
from crosstalk.features.pairing import ops
from crosstalk.wire import relay as w
from crosstalk.wire.pairing import Offer

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
ROOM = "r" * 32


class _Relay:
    """A relay that takes what it is sent; ``lost`` lists, per frame kind, how many of its
    answers are lost (the request took, the caller hears the connection drop); ``away``, how
    many requests fail before reaching it."""

    def __init__(self, *, lost: dict[str, int] | None = None, away: int = 0) -> None:
        self.lost, self.away = dict(lost or {}), away
        self.took: list[str] = []
        self.members: list[str] = []

    async def request(self, frame: Any, reply: type) -> Any:
        kind = type(frame).__name__
        if self.away:
            self.away -= 1
            raise RelayUnreachable("The relay did not answer.")
        if isinstance(frame, w.ListRooms):
            rooms = [w.RoomEntry(ROOM, "joined")] if ANA.fingerprint in self.members else []
            return w.RoomList(0, rooms)
        if isinstance(frame, w.GetRoster):
            return w.Roster(0, ROOM, [w.Member(fp, b"", b"", "joined", "", b"")
                                      for fp in self.members])
        if kind in self.took:
            raise AssertionError(f"{kind} sent twice")
        self.took.append(kind)
        self.members.append(ANA.fingerprint if kind == "Create" else BEN.fingerprint)
        if self.lost.get(kind):
            self.lost[kind] -= 1
            raise RelayUnreachable("The relay did not answer.")
        return w.Ok(0)


OFFER = Offer(label="ben", machine="m", agent=False, ed_pub=BEN.ed_pub, x_pub=BEN.x_pub,
              relay_url="ws://127.0.0.1:1", relay_key=b"k" * 32)


@pytest.mark.parametrize("lost", [{"Create": 1}, {"Add": 1}, {"Create": 1, "Add": 1}])
async def test_a_request_that_took_with_its_answer_lost_is_not_sent_again(
    lost: dict[str, int], autojump_clock: Any
) -> None:
    relay = _Relay(lost=lost)
    await ops._create_room_of_two(relay, ANA, ROOM, OFFER)  # type: ignore[arg-type]
    assert relay.took == ["Create", "Add"]
    assert relay.members == [ANA.fingerprint, BEN.fingerprint]


async def test_a_relay_away_for_a_while_is_asked_again(autojump_clock: Any) -> None:
    relay = _Relay(away=3)
    start = trio.current_time()
    await ops._create_room_of_two(relay, ANA, ROOM, OFFER)  # type: ignore[arg-type]
    assert relay.took == ["Create", "Add"]
    assert trio.current_time() - start >= ops.ACCEPT_PAUSES[0]


async def test_a_relay_that_never_comes_back_is_one_plain_error(autojump_clock: Any) -> None:
    relay = _Relay(away=10_000)
    start = trio.current_time()
    with pytest.raises(RelayUnreachable):
        await ops._create_room_of_two(relay, ANA, ROOM, OFFER)  # type: ignore[arg-type]
    assert relay.took == []
    assert trio.current_time() - start == pytest.approx(sum(ops.ACCEPT_PAUSES))
