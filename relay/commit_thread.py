"""One long-lived thread for the relay's fsyncs, fed by a queue.

The committer waits for each batch's COMMIT (the fsync, which holds no interpreter lock) off the
event loop, so the loop goes on reading and sending meanwhile. ``trio.to_thread.run_sync`` costs
about 50 us of CPU a call here (a capacity limiter, a copied context, the worker's OS thread name
set and reset); handing the call to a thread of our own that waits on a ``SimpleQueue`` costs
about 22 us (5,000 no-op hand-offs, 3 rounds each). The answer comes back as trio's does, through
the run's token, so the loop wakes once per call.

Only one call runs at a time (the committer awaits each), and like ``to_thread.run_sync`` a call
cannot be cancelled once handed over: the caller waits for it, since a commit cut short on our side
would still happen on the thread's.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from types import TracebackType

import outcome
import trio

_Job = tuple[Callable[[], None], trio.lowlevel.Task, trio.lowlevel.TrioToken]


class CommitThread:
    """``with CommitThread() as thread: await thread.run(fn)``; the thread ends with the block."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="relay commit", daemon=True)

    def __enter__(self) -> CommitThread:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._jobs.put(None)  # ends the thread once the call in hand (if any) returns

    async def run(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the thread; return (or raise) what it did."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._jobs.put((fn, trio.lowlevel.current_task(), trio.lowlevel.current_trio_token()))
        await trio.lowlevel.wait_task_rescheduled(_cannot_abort)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, task, token = job
            result = outcome.capture(fn)
            del fn, job
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
            except trio.RunFinishedError:  # pragma: no cover - the run cannot end while it waits
                pass


def _cannot_abort(_: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED
