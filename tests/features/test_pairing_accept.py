"""The joiner's accept of a room of two, against a relay node that has not yet taken in the
inviter's add (a relay of several nodes, under load: CI saw it once)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from crosstalk.errors import NotInvited, Refused, RelayUnreachable
from crosstalk.features.pairing import ops


class _Relay:
    """How the relay answers: ``refusals`` accepts refused as uninvited, then Ok."""

    def __init__(self, refusals: int, *, joined_after: int | None = None) -> None:
        self.refusals = refusals
        self.joined_after = joined_after
        self.accepts: list[float] = []

    async def change(self, *args: Any, **kw: Any) -> None:
        self.accepts.append(trio.current_time())
        if len(self.accepts) <= self.refusals:
            raise NotInvited("The relay refused this: you have no invitation to room 'r'")

    async def says_joined(self, relay: Any, room: str) -> bool:
        return self.joined_after is not None and len(self.accepts) >= self.joined_after


@pytest.fixture
def relay(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> _Relay:
    fake = _Relay(*request.param)
    monkeypatch.setattr(ops, "request_change", fake.change)
    monkeypatch.setattr(ops, "relay_says_joined", fake.says_joined)
    return fake


@pytest.mark.parametrize("relay", [(3,)], indirect=True)
async def test_a_lagging_node_is_asked_again_until_it_knows(relay: _Relay,
                                                            autojump_clock: Any) -> None:
    start = trio.current_time()
    await ops._accept_room_of_two(object(), object(), "r", "fp")  # type: ignore[arg-type]
    assert len(relay.accepts) == 4
    gaps = [b - a for a, b in zip([start, *relay.accepts], relay.accepts, strict=False)]
    assert gaps[1:] == list(ops.ACCEPT_PAUSES[:3])


@pytest.mark.parametrize("relay", [(99,)], indirect=True)
async def test_an_invitation_that_never_comes_is_one_plain_error(relay: _Relay,
                                                                 autojump_clock: Any) -> None:
    start = trio.current_time()
    with pytest.raises(NotInvited) as caught:
        await ops._accept_room_of_two(object(), object(), "r", "fp")  # type: ignore[arg-type]
    assert len(relay.accepts) == len(ops.ACCEPT_PAUSES) + 1
    assert trio.current_time() - start == pytest.approx(sum(ops.ACCEPT_PAUSES))
    message = str(caught.value)
    assert "room new" in message and "\n" not in message


@pytest.mark.parametrize("relay", [(1,)], indirect=True)
async def test_an_earlier_accept_that_took_counts_as_done(relay: _Relay,
                                                         autojump_clock: Any) -> None:
    relay.joined_after = 1
    await ops._accept_room_of_two(object(), object(), "r", "fp")  # type: ignore[arg-type]
    assert len(relay.accepts) == 1


@pytest.mark.parametrize("relay", [(0,)], indirect=True)
async def test_other_refusals_are_not_retried(relay: _Relay, monkeypatch: pytest.MonkeyPatch,
                                              autojump_clock: Any) -> None:
    async def refused(*args: Any, **kw: Any) -> None:
        relay.accepts.append(trio.current_time())
        raise Refused("The relay refused this: the room is full.")

    monkeypatch.setattr(ops, "request_change", refused)
    with pytest.raises(Refused):
        await ops._accept_room_of_two(object(), object(), "r", "fp")  # type: ignore[arg-type]
    assert len(relay.accepts) == 1


@pytest.mark.parametrize("relay", [(0,)], indirect=True)
async def test_a_connection_that_drops_under_the_accept_is_asked_again(
    relay: _Relay, monkeypatch: pytest.MonkeyPatch, autojump_clock: Any
) -> None:
    """Sim seed 189: giving up would leave the room adopted here and never accepted."""
    async def drops_twice(*args: Any, **kw: Any) -> None:
        relay.accepts.append(trio.current_time())
        if len(relay.accepts) <= 2:
            raise RelayUnreachable("The relay did not answer.")

    monkeypatch.setattr(ops, "request_change", drops_twice)
    await ops._accept_room_of_two(object(), object(), "r", "fp")  # type: ignore[arg-type]
    assert len(relay.accepts) == 3
