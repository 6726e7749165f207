"""Run asyncio code (the nats-py client) from a Trio program: one asyncio loop in its own thread.

Theory of operation
-------------------
nats-py only speaks asyncio, and trio-asyncio does not follow Trio 0.35, so the bridge is plain
threads: :class:`AsyncioThread` owns a private event loop running in a daemon thread. Trio code,
or synchronous code such as :meth:`relay.storage.RelayStorage.commit`, hands it a coroutine
*factory* (so the coroutine is created on the loop's thread) and waits for the result with a hard
time bound; on timeout the coroutine is cancelled on its loop and :class:`TimeoutError` is raised.
Callbacks in the other direction (a NATS message for the relay) go through
``trio.lowlevel.TrioToken.run_sync_soon``, which never blocks the asyncio thread.

Hand-offs are coalesced both ways: each costs a write to the other side's wake-up socket (a
syscall that releases the GIL, and a thread switch on a node pinned to one core). Calls made
while a hand-off to the loop is already on its way ride along with it, and answers that come in
while a wake-up of Trio is on its way are delivered by that one wake-up (on two relay nodes
under load, Trio's wake-up writes fell from about 6 % to 3 % of a node's busy time; calls
coincide rarely, since requests come in one at a time). The pending flags are cleared *before*
the queue is drained, so an item queued meanwhile is either drained now or wakes the other side
again.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

import trio

T = TypeVar("T")
_Run = Callable[[concurrent.futures.Future[Any]], Coroutine[Any, Any, None]]


class AsyncioThread:
    """A private asyncio event loop in a daemon thread, stopped by :meth:`close`."""

    def __init__(self, name: str = "nats-asyncio") -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        # Calls for the loop, and whether a hand-off to drain them is on its way.
        self._calls: collections.deque[tuple[_Run, concurrent.futures.Future[Any]]] = (
            collections.deque())
        self._calls_pending = False
        # Answers for each Trio run, and the runs a wake-up is on its way to.
        self._answers: dict[trio.lowlevel.TrioToken, collections.deque[Callable[[], None]]] = {}
        self._answers_pending: set[trio.lowlevel.TrioToken] = set()
        self._thread = threading.Thread(target=main, name=name, daemon=True)
        self._thread.start()
        if not started.wait(10.0):
            raise RuntimeError("the asyncio thread did not start")

    def submit(self, factory: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), self.loop)

    def call(self, factory: Callable[[], Awaitable[T]], timeout: float) -> T:
        """Run ``factory()`` on the loop and block this thread for at most ``timeout`` seconds."""
        future = self.submit(factory)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from NATS within {timeout} s") from None

    async def acall(self, factory: Callable[[], Awaitable[T]], limit: float) -> T:
        """Like :meth:`call`, but Trio keeps running while it waits (and may cancel it).

        The loop wakes Trio through its token when the result is in: no worker thread waits on
        the future (a thread hand-off per NATS call cost more CPU than the call itself)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        self._calls.append((partial(self._run, factory, token, done.set), future))
        if not self._calls_pending:
            self._calls_pending = True
            self.loop.call_soon_threadsafe(self._start_calls)
        try:
            with trio.move_on_after(limit):
                await done.wait()
            if not future.done():
                raise TimeoutError(f"no answer from NATS within {limit} s")
            return future.result()
        finally:
            if not future.done():
                future.cancel()

    def _start_calls(self) -> None:
        """On the loop: start every call queued (those cancelled meanwhile are dropped)."""
        self._calls_pending = False
        while self._calls:
            run, future = self._calls.popleft()
            if future.cancelled():
                continue
            task = self.loop.create_task(run(future))
            future.add_done_callback(partial(_cancel_task, self.loop, task))

    async def _run(
        self, factory: Callable[[], Awaitable[T]], token: trio.lowlevel.TrioToken,
        wake: Callable[[], None], future: concurrent.futures.Future[T],
    ) -> None:
        """On the loop: one call; its outcome goes into ``future`` and Trio is told (also when
        it was cancelled, as when the bridge closes)."""
        try:
            result = await factory()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:  # handed over whole to the caller, as a future does
            _settle(future, exc=exc)
        else:
            _settle(future, result=result)
        finally:
            self._answer(token, wake)

    def _answer(self, token: trio.lowlevel.TrioToken, wake: Callable[[], None]) -> None:
        """On the loop: have Trio call ``wake``, with one wake-up for all answers queued."""
        self._answers.setdefault(token, collections.deque()).append(wake)
        if token not in self._answers_pending:
            self._answers_pending.add(token)
            try:
                token.run_sync_soon(self._deliver_answers, token)
            except trio.RunFinishedError:
                self._answers_pending.discard(token)
                self._answers.pop(token, None)

    def _deliver_answers(self, token: trio.lowlevel.TrioToken) -> None:
        """In Trio: wake every caller whose answer is in."""
        self._answers_pending.discard(token)
        answers = self._answers[token]
        while answers:
            answers.popleft()()

    def close(self, timeout: float = 5.0) -> None:
        if self.loop.is_closed():
            return

        async def cancel_the_rest() -> None:
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), self.loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass  # stop anyway; a task that ignores cancellation is abandoned with the loop
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


def _settle(future: concurrent.futures.Future[T], *, result: Any = None,
            exc: BaseException | None = None) -> None:
    """Complete ``future`` unless its caller cancelled it meanwhile (timed out)."""
    try:
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


def _cancel_task(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None],
                 future: concurrent.futures.Future[Any]) -> None:
    """A caller's future is done: if cancelled (timed out in Trio), cancel its task too."""
    if future.cancelled() and not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)
