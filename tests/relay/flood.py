"""A stranger flooding a relay from one address with throwaway identities (a test's attacker).

``python -m tests.relay.flood PORT SOURCE CONNECTIONS SLOTS`` binds every socket to ``SOURCE``
(any 127.x.y.z is loopback), then at once

* opens ``CONNECTIONS`` WebSocket connections, each authenticating as a fresh identity, and
  holds them, ``PARALLEL`` handshakes at a time; and
* tries ``SLOTS`` times to fill a pairing slot: one throwaway identity opens, another joins.
  Like a thrifty attacker it sends each frame without proof of work first and pays only when
  told ``work_required`` (the relay checks its rates first, so a rate refusal costs nothing).

Once every handshake was tried it prints one JSON line of counts (``"holding": true``) and
holds what it has until a line arrives on stdin (or stdin closes); then it lets go of
everything, prints the final counts and exits. ``--within`` bounds the whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from crosstalk.crypto import do_work
from crosstalk.wire import relay as w
from tests.relay.client import Identity, RelayClient, handshake, open_ws

PARALLEL = 32  # handshakes in flight: under the relay's 64 unauthenticated per address
FAILED = (ConnectionClosed, AssertionError, trio.BrokenResourceError, trio.ClosedResourceError,
          OSError, trio.TooSlowError)  # TooSlowError: not connected within open_ws's bound


class Flood:
    """The attacker's state: what it counted, and when to let go."""

    def __init__(self, port: int, source: str, connections: int) -> None:
        self.port = port
        self.source = source
        self.connections = connections
        self.counts: Counter[str] = Counter()
        self.tried = 0
        self.all_tried = trio.Event()
        self.release = trio.Event()

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[WebSocketConnection]:
        """A WebSocket from ``source`` (see tests.relay.client.open_ws)."""
        async with open_ws(self.port, local_address=self.source) as ws:
            yield ws

    async def hold_one(self, limiter: trio.CapacityLimiter) -> None:
        """One throwaway identity, authenticated and held until released or shed."""
        counted = False
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with limiter:  # from connecting to ready: few unauthenticated at once
                    ws = await stack.enter_async_context(self.connected())
                    await handshake(ws, Identity(), "flood")
                self.counts["authenticated"] += 1
                counted = True
                self._tried()
                await self._hold(ws)
        except* FAILED:  # trio wraps what fails inside a nursery in a group
            if not counted:
                self.counts["failed"] += 1
                self._tried()

    def _tried(self) -> None:
        self.tried += 1
        if self.tried >= self.connections:
            self.all_tried.set()

    async def _hold(self, ws: WebSocketConnection) -> None:
        async with trio.open_nursery() as nursery:
            async def shed() -> None:
                try:
                    while True:
                        await ws.get_message()
                except ConnectionClosed:
                    self.counts["shed"] += 1
                    nursery.cancel_scope.cancel()

            nursery.start_soon(shed)
            await self.release.wait()
            nursery.cancel_scope.cancel()

    async def fill_slots(self, tries: int) -> None:
        """Open a slot with one throwaway and join it with another, ``tries`` times."""
        for _ in range(tries):
            try:
                async with self.client() as owner, self.client() as joiner:
                    await self._fill(owner, joiner)
            except* FAILED:  # e.g. the owner shed as its address's idlest while it paid
                self.counts["slot_try_failed"] += 1

    async def _fill(self, owner: RelayClient, joiner: RelayClient) -> None:
        got = await self._paid(owner, lambda work: w.SlotOpen(owner.next_req(), work), "")
        if not isinstance(got, w.Slot):
            self.counts[f"open_refused:{got}"] += 1
            return
        number = got.slot
        joined = await self._paid(
            joiner, lambda work: w.SlotJoin(joiner.next_req(), number, work), number)
        if isinstance(joined, w.SlotJoined):
            self.counts["slots_filled"] += 1
        else:
            self.counts[f"join_refused:{joined}"] += 1

    @asynccontextmanager
    async def client(self) -> AsyncIterator[RelayClient]:
        async with self.connected() as ws:
            client = await handshake(ws, Identity(), "flood")
            client.paying = False  # it pays only when told to, below
            yield client

    async def _paid(self, client: RelayClient, make: Callable[[bytes], w.ClientFrame],
                    slot: str) -> w.RelayFrame | str:
        reply = await client.request(make(b""))
        if isinstance(reply, w.Error) and reply.code == "work_required":
            ask = await client.request(w.WorkAsk(client.next_req(), slot))
            assert isinstance(ask, w.Work)
            # On a thread, so the held connections go on answering while it pays.
            work = await trio.to_thread.run_sync(do_work, ask.seed, ask.bits)
            reply = await client.request(make(work))
        return reply.code if isinstance(reply, w.Error) else reply


async def _released_by_stdin(flood: Flood) -> None:
    stdin = trio.lowlevel.FdStream(0)
    await stdin.receive_some(64)
    flood.release.set()


async def main(port: int, source: str, connections: int, slots: int, within: float) -> None:
    flood = Flood(port, source, connections)
    limiter = trio.CapacityLimiter(PARALLEL)
    with trio.move_on_after(within):
        async with trio.open_nursery() as nursery:
            for _ in range(connections):
                nursery.start_soon(flood.hold_one, limiter)
            await flood.fill_slots(slots)
            await flood.all_tried.wait()
            print(json.dumps({"holding": True, **flood.counts}), flush=True)
            nursery.start_soon(_released_by_stdin, flood)
    print(json.dumps(dict(flood.counts)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("source")
    parser.add_argument("connections", type=int)
    parser.add_argument("slots", type=int)
    parser.add_argument("--within", type=float, default=60.0)
    args = parser.parse_args()
    trio.run(main, args.port, args.source, args.connections, args.slots, args.within)
