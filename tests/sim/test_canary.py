"""The determinism canary records the task steps trio really runs, in the order it runs them."""

from __future__ import annotations

import hashlib

import trio
import trio.testing

from tests.sim import determinism


class _Steps(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def _ticker(times: int) -> None:
    for _ in range(times):
        await trio.sleep(1.0)  # the same deadlines: several tasks wake in one batch


async def _tickers() -> None:
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(_ticker, 3 + i, name=f"ticker{i}")


def test_canary_records_the_steps_an_instrument_sees() -> None:
    """Told each batch as the scheduler orders it, the canary has the very steps (by name, in
    order) a ``before_task_step`` instrument sees, batches of several tasks included."""
    seen = _Steps()
    entropy = determinism.activate(7)
    try:
        trio.run(_tickers, clock=trio.testing.MockClock(autojump_threshold=0),
                 instruments=[seen])
    finally:
        determinism.deactivate()
    assert entropy.canary.steps == len(seen.names) > 30
    assert entropy.canary.hexdigest() == hashlib.sha256("".join(seen.names).encode()).hexdigest()
