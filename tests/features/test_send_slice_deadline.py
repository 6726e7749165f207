"""A send whose slices do not come within ``SLICE_DEADLINE`` fails ``too_large`` with nothing
queued, well inside its clients' 30 s: the client never gives up (``daemon_unreachable``) on a
send that is then delivered anyway."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from crosstalk.errors import TooLarge
from crosstalk.features.messages import ops
from crosstalk.features.messages.ops import SLICE_DEADLINE, SendParams


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A transcript that is a FIFO: opening it to read blocks until a writer comes. The slice's
    worker thread stays blocked there until the test opens it to write, then gets EOF."""
    path = tmp_path / "transcript.jsonl"
    os.mkfifo(path)
    yield path
    try:  # a reader is blocked in open(): opening to write lets it go, then EOF ends it
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader left waiting (the slice was never asked for)


@pytest.mark.parametrize("plant", [False, True])
async def test_slices_that_take_too_long_fail_the_send_at_the_deadline(
    plant: bool, fifo: Path, autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turns slice whose transcript never opens: the send fails too_large at exactly
    ``SLICE_DEADLINE`` (10 s), saying nothing was sent. The planted bug waits without a bound:
    a minute on, the send has not answered."""
    if plant:
        monkeypatch.setattr(ops, "SLICE_DEADLINE", math.inf)
    params = SendParams(to="ben", text="x", slices=["turns:2"], transcript=str(fifo))
    with trio.move_on_after(60) as waited:
        with pytest.raises(TooLarge) as failed:
            await ops._build_slices(None, params)  # type: ignore[arg-type]  # no daemon asked
    if plant:
        assert waited.cancelled_caught and trio.current_time() == 60
        return
    assert trio.current_time() == SLICE_DEADLINE == 10
    assert "nothing was sent" in failed.value.message
