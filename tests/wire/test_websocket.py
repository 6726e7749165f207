"""Only wsproto's refusal of a late pong leaves a connection's nursery quietly."""

from __future__ import annotations

import pytest
import trio
from wsproto.utilities import LocalProtocolError

from crosstalk.wire.websocket import is_late_pong, late_pongs_ignored

LATE = "Event Pong(payload=b'x') cannot be sent in state ConnectionState.LOCAL_CLOSING."
OTHER = "Event TextMessage(data='x') cannot be sent in state ConnectionState.CLOSED."


def test_only_the_refused_pong_in_the_closing_state_is_a_late_pong() -> None:
    assert is_late_pong(LocalProtocolError(LATE))
    assert not is_late_pong(LocalProtocolError(OTHER))
    assert not is_late_pong(ValueError(LATE))


async def _nursery_raising(*errors: Exception) -> None:
    async def fail(exc: Exception) -> None:
        raise exc

    async with trio.open_nursery() as nursery:
        for exc in errors:
            nursery.start_soon(fail, exc)


async def test_a_late_pong_leaving_a_nursery_is_let_go() -> None:
    with late_pongs_ignored():
        await _nursery_raising(LocalProtocolError(LATE))


@pytest.mark.parametrize("other", [LocalProtocolError(OTHER), ValueError("a bug")])
async def test_anything_else_leaving_the_nursery_is_raised(other: Exception) -> None:
    with pytest.raises(BaseExceptionGroup) as caught, late_pongs_ignored():
        await _nursery_raising(other)
    assert caught.value.exceptions[0] is other
