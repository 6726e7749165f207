"""The relay's Trio shell: sockets, clocks, storage and one :class:`~relay.core.RelayCore`.

Shape: one listener task; per connection a reader (WebSocket -> core) and a writer (outbox ->
WebSocket, plus the heartbeat); one committer; one ticker. Readers call the core synchronously and
append its effects to one pending list *without yielding in between*, so effects keep the core's
order. The committer takes everything pending, commits all its writes in one SQLite transaction
(group commit; applied on the loop, its fsync waited for on the committer's own thread, see
``_commit``), then hands each frame to its connection's outbox, encoded once (JSON and WebSocket
framing) however many connections it goes to. So nothing is acknowledged, pushed or replayed
before it is durable (acknowledgements alone excepted, which promise nothing: see
:func:`~relay.storage.needs_sync`).

A commit's frames for one connection go out joined, in one write: a commit that pushes twenty
ops to one connection costs one syscall there, not twenty. The committer writes them itself,
without yielding, when that connection has nothing queued and its socket takes them
(:meth:`RelayServer._write_now`); only what the socket does not take (or a TLS connection's frames)
goes to the connection's writer task, which sends its whole outbox in one write
(:meth:`RelayServer._drain`). Waking a writer per connection per commit cost more than the write.

Outboxes are bounded; a connection that cannot keep up is closed (it resumes from its cursor when
it comes back) rather than slowing everyone. The heartbeat pings a connection silent for
``ping_interval`` and drops it if no pong comes within ``ping_timeout``, or if one write has been
under way for ``send_timeout``; every close is bounded by ``close_timeout`` (trio-websocket has no
keepalive and waits 60 s by default). One task keeps those deadlines for every connection
(:meth:`RelayServer._heartbeat`), so a writer waking for its frames opens no timeout scope.
"""

from __future__ import annotations

import functools
import heapq
import logging
import math
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable

import attrs
import trio
from nacl.signing import SigningKey
from nacl.utils import random
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_server_stream

from crosstalk.sim_hooks import probe
from crosstalk.wire.relay import MAX_FRAME, Op, encode_frame
from crosstalk.wire.websocket import late_pongs_ignored
from relay.admission import MAX_HANDSHAKING, SHED_CODE, fd_budget, peer_source, tunnel_source
from relay.commit_thread import CommitThread
from relay.core import RelayCore
from relay.effects import Close, Effect, Send
from relay.http import HeadTooLarge, ReplayStream, RequestHead, read_head, response, text_frame
from relay.limits import RelayConfig
from relay.metrics import Latencies, ShellCounters, health_body, metrics_body
from relay.storage import OpAppended, RelayStorage, StagedStorage, Write, needs_sync
from relay.trim import Trimmer, give_back

log = logging.getLogger(__name__)

OUTBOX = 50_000  # frames queued for one connection before it counts as too slow
HIGH_WATER = 20_000  # pending effects before readers wait for the committer
GATHER_ROUNDS = 64  # scheduling rounds the committer waits for a batch to grow
GATHER_QUIET = 4  # ... but no longer than this many rounds in a row without growth
GATHER_MAX_EFFECTS = 4096  # ... nor past this many effects
GATHER_MAX_SECONDS = 0.005  # ... nor longer than this
INLINE_SYNC_WRITES = 8  # a batch this small waits for its fsync on the loop (see _commit)
WRITE_BYTES = 1 << 16  # a writer joins queued frames into writes of about this size
MESSAGE_QUEUE = 32  # frames trio-websocket may parse ahead per connection
STOP_CLOSE = 0.1  # seconds to let our close frame go out when the relay itself stops
_FRAMES = (Send, Close)  # the effects that are not writes


@attrs.frozen
class ShellTimings:
    """Durations for the shell (float seconds)."""

    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    connect_timeout: float = 10.0
    close_timeout: float = 3.0
    send_timeout: float = 30.0
    tick_interval: float = 1.0


@attrs.define(eq=False)
class _Link:
    outbox: trio.MemorySendChannel[bytes | None]  # whole WebSocket frames; None: close
    scope: trio.CancelScope
    last_inbound: float  # when a frame (or the pong of our ping) last came in
    ws: WebSocketConnection | None = None  # pinged by the heartbeat
    stream: ReplayStream | None = None  # under ws: where the committer writes directly
    queued: bool = False  # the writer has frames to send: a new frame must go behind them
    close_reason: str | None = None
    sending_since: float | None = None  # when the write under way began
    pinging: bool = False
    check: int = 0  # the heartbeat entry that is current for this link
    closed: bool = False
    # Op pushes waiting in the outbox, for the push histogram: (the outbox item that ends their
    # commit's frames here, counted from 1; when that commit returned; how many ops).
    pushes: deque[tuple[int, float, int]] = attrs.Factory(deque)
    enqueued: int = 0  # items put in the outbox, ever
    written: int = 0  # items the writer wrote, ever


class RelayServer:
    """Serves one relay core over WebSocket + HTTP on one port."""

    def __init__(
        self,
        storage: RelayStorage,
        signing_key_seed: bytes,
        *,
        config: RelayConfig | None = None,
        timings: ShellTimings | None = None,
        wall_clock: Callable[[], float] = time.time,
        commit_in_thread: bool = False,
        client_address_header: str | None = None,
        draw: Callable[[int], bytes] = random,
        run_commit: Callable[[list[Write], Callable[[], None]], Awaitable[None]] | None = None,
        outbox: int = OUTBOX,
    ) -> None:
        # Seams for the simulation (tests/sim/net.py), which runs this shell on virtual time:
        # ``draw``, where nonces and seeds come from; ``run_commit(writes, commit)``, what runs
        # a commit that must not block the loop (by default a SQLite fsync goes to the
        # committer's thread, any other storage commits inline); ``outbox``, frames queued per
        # connection before it counts as too slow.
        self._storage = storage
        self._commit_in_thread = commit_in_thread
        # Asked once: an isinstance check against a Protocol walks its members on every call.
        self._staged = storage if isinstance(storage, StagedStorage) else None
        self._run_commit = run_commit  # the committer's thread, while it runs, unless given
        self._outbox = outbox
        self._clock = wall_clock
        self._address_header = client_address_header
        self.timings = timings or ShellTimings()
        config = config or RelayConfig()
        budget = fd_budget()
        self._max_handshaking = min(MAX_HANDSHAKING, budget // 4)
        config = attrs.evolve(
            config, max_unauthenticated=min(config.max_unauthenticated, budget - budget // 4),
            # The budget is half of what is left after the reserve: authenticated connections
            # may have it all (one descriptor each; their peers are elsewhere).
            max_authenticated=min(config.max_authenticated, 2 * budget),
        )
        self.core = RelayCore(
            signing_key=SigningKey(signing_key_seed), draw=draw, config=config,
            snapshot=storage.load(),
        )
        # Accepted streams not yet handed to the core, oldest first: past the cap the oldest
        # is cancelled, so a flood of silent sockets cannot fill the fd table.
        self._handshaking: dict[int, trio.CancelScope] = {}
        self._next_stream = 0
        self.counters = ShellCounters()
        self.latencies = Latencies()
        self._pending: list[Effect] = []
        self._sequenced: list[float] = []  # when each post among _pending was sequenced
        self._wake = trio.Event()
        self._drained = trio.Event()
        self._links: dict[int, _Link] = {}
        self._next_conn = 0
        # The heartbeat's deadlines: (when, entry, link), one current entry per open link.
        self._beats: list[tuple[float, int, _Link]] = []
        self._beat_entries = 0
        self._beat_sleep = trio.CancelScope()
        self._pings: trio.Nursery | None = None
        self._trimmer = Trimmer()

    async def serve(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen on ``host:port`` (0 picks one) and serve until cancelled; reports the port."""
        listeners: list[trio.abc.Listener[trio.abc.Stream]] = []
        for listener in await trio.open_tcp_listeners(port, host=host):
            if ssl_context is not None:
                listeners.append(trio.SSLListener(listener, ssl_context))
            else:
                listeners.append(listener)
        first = listeners[0]
        sock_listener = first.transport_listener if isinstance(first, trio.SSLListener) else first
        assert isinstance(sock_listener, trio.SocketListener)
        bound = sock_listener.socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(self.run)
            await nursery.start(trio.serve_listeners, self.handle_stream, listeners)
            log.info("relay listening on %s:%d", host, bound)
            task_status.started(bound)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The committer and the ticker; streams can be handed to :meth:`handle_stream`."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._committer)
            nursery.start_soon(self._ticker)
            await nursery.start(self._heartbeat)
            task_status.started()

    # --- effects -------------------------------------------------------------------------------

    def _feed(self, effects: list[Effect]) -> None:
        """Queue the core's effects, in order. Must not yield between the core call and this."""
        if effects:
            self._pending.extend(effects)
            self._wake.set()
            for effect in effects:  # for the commit histogram: a post's one write
                if type(effect) is OpAppended:
                    self._sequenced.append(trio.current_time())

    async def _wait_for_room(self) -> None:
        while len(self._pending) > HIGH_WATER:
            await self._drained.wait()

    async def _committer(self) -> None:
        if self._staged is None or self._commit_in_thread or self._run_commit is not None:
            await self._commit_batches()  # no fsync of ours to wait for, or a runner given
            return
        with CommitThread() as thread:
            self._run_commit = lambda _, fsync: thread.run(fsync)
            await self._commit_batches()

    async def _commit_batches(self) -> None:
        while True:
            await self._wake.wait()
            await self._gather()
            self._wake = trio.Event()
            batch, self._pending = self._pending, []
            sequenced, self._sequenced = self._sequenced, []
            writes: list[Write] = [e for e in batch if not isinstance(e, _FRAMES)]
            if writes:
                # A failed commit is fatal on purpose: the core already counts these as durable.
                await self._commit(writes)
            committed = trio.current_time()
            for at in sequenced:
                self.latencies.commit.observe(committed - at)
            self._dispatch(batch, committed)
            self._drained.set()
            self._drained = trio.Event()

    async def _gather(self) -> None:
        """Let readers that already have frames feed the core before committing (group commit).

        A frame takes a few scheduling rounds to travel from the socket through trio-websocket's
        reader to ours, so stop only after ``GATHER_QUIET`` rounds in a row add nothing (an idle
        relay commits after a handful of cheap rounds). Under a flood the batch is cut at
        ``GATHER_MAX_EFFECTS`` or ``GATHER_MAX_SECONDS``: with 500 busy connections, gathering
        by rounds alone held the first commit back for seconds.
        """
        quiet = 0
        deadline = trio.current_time() + GATHER_MAX_SECONDS
        for _ in range(GATHER_ROUNDS):
            before = len(self._pending)
            await trio.lowlevel.cancel_shielded_checkpoint()
            quiet = quiet + 1 if len(self._pending) == before else 0
            if quiet >= GATHER_QUIET or len(self._pending) >= GATHER_MAX_EFFECTS:
                return
            if trio.current_time() >= deadline:
                return

    async def _commit(self, writes: list[Write]) -> None:
        """Commit one batch inline: a deliberate, measured exception to "no blocking calls".

        A WAL commit with synchronous=FULL took 0.4-1.5 ms on the project machine (tens of ms for
        a batch of thousands of writes). In a worker thread it was far worse under load: the
        handoff alone took 6 ms median and 74 ms at p90, and with 500 busy connections one
        2,000-write commit took about 4 s, because each SQLite call in the thread must win the
        GIL back from the busy event loop. Blocking the loop for the length of one commit costs
        every connection far less; heartbeats and timeouts are seconds long.

        A :class:`~relay.storage.StagedStorage` (SQLite) applies the batch inline and waits for
        only its COMMIT (the fsync, which holds no interpreter lock) on the committer's own
        thread (:mod:`relay.commit_thread`): one handoff per batch, and the loop sends the frames
        of earlier batches and reads the next meanwhile. Nothing is dispatched before the COMMIT
        returns. A batch of acknowledgements alone is committed inline without an fsync (see
        :func:`~relay.storage.needs_sync` for why that keeps every promise): an idle pair of
        daemons sends one ack per op each way, so this was every other commit.

        A batch of at most ``INLINE_SYNC_WRITES`` writes waits for its fsync on the loop too.
        Such a batch means little traffic, so there is little for the loop to do meanwhile, and
        the thread's hand-off was a sixth of the relay's CPU per message when two daemons trade
        messages one at a time (1.47 -> 1.23 ms per message, bench/timeline.py, A/B
        interleaved, 5 rounds). Under load batches grow past it (a relay held up by an fsync
        finds more frames waiting when it comes back), and the fsync goes to the thread again.

        A backend whose commit is a network round trip (NATS) passes ``commit_in_thread=True``
        and accepts the handoff cost instead of blocking the loop for the round trip.
        """
        if self._commit_in_thread:
            await trio.to_thread.run_sync(self._storage.commit, writes)
        elif self._staged is not None and not needs_sync(writes):
            self._staged.stage(writes, sync=False)()
        elif self._staged is not None and len(writes) <= INLINE_SYNC_WRITES:
            self._staged.stage(writes)()
        elif self._staged is not None:
            assert self._run_commit is not None
            await self._run_commit(writes, self._staged.stage(writes))
        elif self._run_commit is not None:
            await self._run_commit(writes, functools.partial(self._storage.commit, writes))
        else:
            self._storage.commit(writes)
        self.counters.commits += 1
        self.counters.committed_writes += len(writes)
        await trio.lowlevel.checkpoint()

    def _dispatch(self, batch: list[Effect], committed: float | None = None) -> None:
        """Hand ``batch``'s frames to their connections; ``committed``: when its writes were
        committed (its op pushes are timed from then; None: not timed)."""
        encoded: dict[int, bytes] = {}  # one encoding per frame object, however many recipients
        outgoing: dict[int, list[bytes | None]] = {}  # per connection, in order; None: close
        pushes: dict[int, int] = {}  # op frames per connection, for the push histogram
        links = self._links
        for effect in batch:
            if type(effect) is Send:  # the bulk of a batch: one per recipient of each op
                conn, frame = effect.conn, effect.frame
                if conn not in links:
                    continue
                if committed is not None and type(frame) is Op:
                    pushes[conn] = pushes.get(conn, 0) + 1
                data = encoded.get(id(frame))
                if data is None:
                    data = encoded[id(frame)] = text_frame(encode_frame(frame))
                queue = outgoing.get(conn)
                if queue is None:
                    outgoing[conn] = [data]
                else:
                    queue.append(data)
            elif isinstance(effect, Close):
                link = self._links.get(effect.conn)
                if link is not None:
                    link.close_reason = effect.reason
                    outgoing.setdefault(effect.conn, []).append(None)
        for conn, items in outgoing.items():
            self._write_now(conn, links[conn], items, committed or 0.0, pushes.get(conn, 0))

    def _write_now(
        self, conn: int, link: _Link, items: list[bytes | None], committed: float = 0.0,
        ops: int = 0,
    ) -> None:
        """Write ``items`` to ``link`` now if nothing is queued before them; queue the rest.

        The frames before a close go out joined in one write, without a scheduling round; what
        the socket does not take, and the close, go to the writer in order.
        """
        frames: list[bytes] = []
        for item in items:
            if item is None:
                break
            frames.append(item)
        ws, stream = link.ws, link.stream
        if (frames and not link.queued and stream is not None and ws is not None
                and ws.closed is None and not link.scope.cancel_called):
            data = frames[0] if len(frames) == 1 else b"".join(frames)
            try:
                sent = stream.send_now(data)
            except OSError:
                link.scope.cancel()  # the peer is gone; the reader ends the connection
                return
            if sent is not None:
                rest = items[len(frames):]
                if sent < len(data):
                    rest.insert(0, data[sent:])
                    self.counters.frames_out += len(frames) - 1  # the writer counts the tail
                else:
                    self.counters.frames_out += len(frames)
                items = rest
        for item in items:
            self._enqueue(conn, link, item)
        if not ops:
            return
        if items:  # pushed once the writer has written this commit's last item here
            link.pushes.append((link.enqueued, committed, ops))
        else:
            self.latencies.push.observe(trio.current_time() - committed, ops)

    def _enqueue(self, conn: int, link: _Link, item: bytes | None) -> None:
        try:
            link.outbox.send_nowait(item)
            link.queued = True
            link.enqueued += 1
        except trio.WouldBlock:
            log.warning("relay conn %d: outbox full, closing a slow consumer", conn)
            probe("relay.slow_consumer")
            self.counters.dropped_slow += 1
            link.scope.cancel()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the writer is gone; the connection is being torn down

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(self.timings.tick_interval)
            self._feed(self.core.tick(self._clock()))
            if self._trimmer.observe(len(self._links)):
                give_back()
                self.counters.memory_trims += 1

    # --- the heartbeat -------------------------------------------------------------------------

    async def _heartbeat(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Check each link when its earliest deadline comes: ping it after ``ping_interval``
        without a frame in, drop it when a write has taken ``send_timeout``.

        A writer only stamps ``sending_since`` around its write, which costs far less than the
        timeout scope per wake it replaces (about 12 us: one for the idle wait, one for the
        write). Each link has one current entry in a heap; a stale one (the link was checked
        again, or closed) is skipped when it comes up.
        """
        async with trio.open_nursery() as self._pings:
            task_status.started()
            while True:
                now = trio.current_time()
                while self._beats and self._beats[0][0] <= now:
                    _, entry, link = heapq.heappop(self._beats)
                    if entry == link.check and not link.closed:
                        self._check(link, now)
                with trio.CancelScope() as self._beat_sleep:
                    self._beat_sleep.deadline = self._beats[0][0] if self._beats else math.inf
                    await trio.sleep_forever()

    def _check(self, link: _Link, now: float) -> None:
        t = self.timings
        # Deadlines compared as _schedule computes them (``since + timeout``): ``now - since``
        # can round below the timeout at the very deadline, and the check was then put back at
        # that same deadline for ever, spinning the loop (the simulation's mock clock wakes at
        # exactly the deadline; a real clock does in about 1 case in 100 that land on it).
        if link.sending_since is not None and now >= link.sending_since + t.send_timeout:
            link.scope.cancel()  # a write stuck this long: the peer is not reading
            return
        if not link.pinging and now >= link.last_inbound + t.ping_interval:
            assert self._pings is not None
            link.pinging = True
            self._pings.start_soon(self._ping, link)
        self._schedule(link, now)

    def _schedule(self, link: _Link, now: float) -> None:
        """Give ``link`` its next check: its ping or its write's deadline, whichever is first.

        A write that starts after this is checked in time too: the entry is never later than
        ``now + send_timeout``, and a write starting later has a later deadline.
        """
        t = self.timings
        since = now if link.sending_since is None else link.sending_since
        due = since + t.send_timeout
        if not link.pinging:
            due = min(due, link.last_inbound + t.ping_interval)
        self._beat_entries += 1
        link.check = self._beat_entries
        heapq.heappush(self._beats, (due, link.check, link))
        if due < self._beat_sleep.deadline:
            self._beat_sleep.deadline = due

    def _drop_stale_beats(self) -> None:
        """Rebuild the heartbeat heap without stale entries once they outnumber the live.

        A closed link's entry would otherwise stay until its deadline came up (up to
        ``send_timeout`` later), and with it the link, its WebSocket, socket and channels: after
        a flood of 1,500 connections the relay still held all of them, about 20 MB, for half a
        minute. Rebuilding costs one pass over the heap per about as many closes as live links.
        """
        if len(self._beats) <= 2 * len(self._links) + 64:
            return
        self._beats = [entry for entry in self._beats
                       if not entry[2].closed and entry[1] == entry[2].check]
        heapq.heapify(self._beats)

    async def _ping(self, link: _Link) -> None:
        assert link.ws is not None
        try:
            with trio.fail_after(self.timings.ping_timeout):
                await link.ws.ping()
        except trio.TooSlowError:
            probe("relay.ping_unanswered")
            link.scope.cancel()
            return
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        link.pinging = False
        if not link.closed:
            link.last_inbound = trio.current_time()
            self._schedule(link, link.last_inbound)

    # --- connections ---------------------------------------------------------------------------

    async def handle_stream(self, stream: trio.abc.Stream) -> None:
        """Serve one accepted byte stream (HTTP or WebSocket) until it ends; closes it."""
        t = self.timings
        self._next_stream += 1
        token = self._next_stream
        try:
            with trio.CancelScope() as shed:
                self._handshaking[token] = shed
                if len(self._handshaking) > self._max_handshaking:
                    self._handshaking.pop(next(iter(self._handshaking))).cancel()
                    self.counters.shed_handshakes += 1
                head: RequestHead | None = None
                with trio.move_on_after(t.connect_timeout) as reading:
                    head, data = await read_head(stream)
                if reading.cancelled_caught:
                    return
                if head is not None and head.is_upgrade and head.path == "/ws":
                    source = tunnel_source(head, peer_source(stream), self._address_header)
                    await self._websocket(ReplayStream(stream, data), source, token)
                    return
                self._handshaking.pop(token, None)
                with trio.move_on_after(t.close_timeout):
                    await stream.send_all(self._http_answer(head))
        except (trio.BrokenResourceError, trio.ClosedResourceError, HeadTooLarge):
            pass
        except Exception:
            # A bug met on one connection must not take the relay down for everyone: report it
            # (ERROR is for bugs) and drop only this connection; its state was already released.
            log.error("relay: connection handler failed", exc_info=True)
        finally:
            self._handshaking.pop(token, None)
            with trio.move_on_after(t.close_timeout) as scope:
                scope.shield = True
                await stream.aclose()

    def _http_answer(self, head: RequestHead | None) -> bytes:
        if head is None:
            return response(400, "Bad Request", "text/plain", b"bad request\n")
        if head.method == "GET" and head.path == "/health":
            return response(200, "OK", "application/json", health_body(self.core.statistics()))
        if head.method == "GET" and head.path == "/metrics":
            body = metrics_body(self.core.statistics(), self.counters, self.latencies)
            return response(200, "OK", "text/plain; version=0.0.4", body)
        if head.path == "/ws":
            return response(426, "Upgrade Required", "text/plain", b"connect with WebSocket\n")
        return response(404, "Not Found", "text/plain", b"crosstalk relay\n")

    async def _websocket(self, stream: ReplayStream, source: str, token: int) -> None:
        with late_pongs_ignored():  # a ping that crossed our close frame is no fault
            await self._websocket_in(stream, source, token)

    async def _websocket_in(self, stream: ReplayStream, source: str, token: int) -> None:
        t = self.timings
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(t.connect_timeout) as handshake:
                request = await wrap_server_stream(
                    nursery, stream, message_queue_size=MESSAGE_QUEUE,
                    max_message_size=MAX_FRAME + 4096,
                )
                ws = await request.accept()
            if handshake.cancelled_caught:
                nursery.cancel_scope.cancel()
                return
            self._next_conn += 1
            conn = self._next_conn
            self._handshaking.pop(token, None)  # the core counts it from here on
            reason: list[str | None] = [None]
            try:
                await self._run_link(ws, stream, conn, source, reason)
            finally:
                # When the relay is stopping, trio-websocket's reader is cancelled with us, so
                # the peer's close reply can never be read: send our close frame and go.
                stopping = trio.current_effective_deadline() == -math.inf
                with trio.move_on_after(STOP_CLOSE if stopping else t.close_timeout) as scope:
                    scope.shield = True
                    if reason[0] is None:
                        await ws.aclose()
                    else:  # the core closed it: say why in the close frame
                        await ws.aclose(code=SHED_CODE, reason=reason[0][:120])
                nursery.cancel_scope.cancel()

    async def _run_link(
        self, ws: WebSocketConnection, stream: ReplayStream, conn: int, source: str,
        reason: list[str | None],
    ) -> None:
        send, receive = trio.open_memory_channel[bytes | None](self._outbox)
        with trio.CancelScope() as scope:
            link = self._links[conn] = _Link(send, scope, trio.current_time(), ws, stream)
            self._schedule(link, link.last_inbound)
            self._feed(self.core.connection_opened(conn, source, self._clock()))
            log.debug("relay conn %d: opened from %s", conn, source)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer, ws, stream, receive, link)
                    await self._reader(ws, conn, link)
                    nursery.cancel_scope.cancel()
            finally:
                reason[0] = link.close_reason
                link.closed = True
                del self._links[conn]
                self._drop_stale_beats()
                receive.close()
                self._feed(self.core.connection_closed(conn, self._clock()))
                log.debug("relay conn %d: closed", conn)

    async def _reader(self, ws: WebSocketConnection, conn: int, link: _Link) -> None:
        while (message := await self._next_message(ws, link)) is not None:
            await self._wait_for_room()
            self._feed(self.core.frame_received(conn, message, self._clock()))

    async def _next_message(self, ws: WebSocketConnection, link: _Link) -> str | bytes | None:
        """The client's next frame, counted and its arrival noted; None once it closed."""
        try:
            message = await ws.get_message()
        except ConnectionClosed:
            return None
        link.last_inbound = trio.current_time()
        self.counters.frames_in += 1
        return message

    async def _writer(
        self, ws: WebSocketConnection, stream: ReplayStream,
        receive: trio.MemoryReceiveChannel[bytes | None], link: _Link,
    ) -> None:
        try:
            while await self._drain(ws, stream, receive, await receive.receive(), link):
                pass
        except (ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        link.scope.cancel()

    async def _drain(
        self, ws: WebSocketConnection, stream: ReplayStream,
        receive: trio.MemoryReceiveChannel[bytes | None], item: bytes | None, link: _Link,
    ) -> bool:
        """Send ``item`` and whatever is queued behind it; False once asked to close.

        Queued frames go out joined, up to ``WRITE_BYTES`` a write, through the stream under
        trio-websocket (one ``send_message`` per frame was one syscall per frame). Each write
        is timed by the heartbeat through ``sending_since``, not by a cancel scope of its own.
        """
        while item is not None:  # None: the core asked to close this connection
            frames, closing = _take_queued(receive, item)
            link.sending_since = trio.current_time()
            try:
                if not await stream.send_all_if(b"".join(frames), lambda: ws.closed is None):
                    return False  # trio-websocket is closing it (the peer's close, say)
            finally:
                link.sending_since = None
            self.counters.frames_out += len(frames)
            link.written += len(frames)
            if link.pushes:
                self._pushed(link)
            if closing:
                return False
            try:  # no scheduling round while frames are queued
                item = receive.receive_nowait()
            except trio.WouldBlock:
                link.queued = False  # all sent: the committer may write directly again
                return True
        return False

    def _pushed(self, link: _Link) -> None:
        """Observe the op pushes the writer's writes have now carried to the socket."""
        now = trio.current_time()
        while link.pushes and link.pushes[0][0] <= link.written:
            _, committed, ops = link.pushes.popleft()
            self.latencies.push.observe(now - committed, ops)


def _take_queued(
    receive: trio.MemoryReceiveChannel[bytes | None], first: bytes
) -> tuple[list[bytes], bool]:
    """``first`` and the frames queued behind it, up to ``WRITE_BYTES``; True if a close (None)
    ended them."""
    frames, size = [first], len(first)
    while size < WRITE_BYTES:
        try:
            item = receive.receive_nowait()
        except trio.WouldBlock:
            break
        if item is None:
            return frames, True
        frames.append(item)
        size += len(item)
    return frames, False
