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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")


class AsyncioThread:
    """A private asyncio event loop in a daemon thread, stopped by :meth:`close`."""

    def __init__(self, name: str = "nats-asyncio") -> None:
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

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
        future = self.submit(factory)
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def woke(_: concurrent.futures.Future[T]) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(woke)
        try:
            with trio.move_on_after(limit):
                await done.wait()
            if not future.done():
                raise TimeoutError(f"no answer from NATS within {limit} s")
            return future.result()
        finally:
            if not future.done():
                future.cancel()

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
