"""The relay in the simulation: the real relay shell (``relay/server.py``) on in-memory streams.

Byte tier (simulation.md §2): each client connection is a pair of :mod:`tests.sim.pipes`
streams. The relay's end goes to :meth:`RelayServer.handle_stream` (the HTTP head, the
trio-websocket server, the per-connection reader and writer, the committer with its group
commit, the heartbeat and the ticker: everything a real relay runs per connection), the node's
end to a trio-websocket client handed to the relay link through its ``connect`` seam. Storage is
a :class:`~relay.storage.MemoryStorage` that outlives relay incarnations; the shell commits to it
inline (it is not a staged SQLite store, so no commit thread).

Ground truth is taken where the product cannot fake it: every batch the shell commits is
recorded, in commit order, as it reaches storage (joins, drops, posts: one relay step per
commit); what the relay told each client (its refusals of posts) as the client's end reads it.

Faults: per-node delays (FIFO), dropping a connection, refusing a node's reconnects, a node's
link half-open (its bytes held both ways: each side's pings go unanswered), freezing the relay
(no byte moves either way) and crashing it (every connection reset at once, nothing stored after the
crash point, the shell rebuilt from ``storage.load()``). ``busy`` lowers the core's backlog cap
for a while, so posts meet the real ``backlog_full`` refusal. Two BUGGIFY points sit in the
shell's commit (its ``run_commit`` seam): a slow commit (the committer waits, readers go on)
and a crash while a batch is being committed (its frames must never have left).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import attrs
import trio
from trio_websocket import WebSocketConnection, wrap_client_stream

from crosstalk.actors.relay_link import LinkTimings, RelaySocket
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import unframe_body
from relay.core import RelayCore
from relay.effects import Send
from relay.limits import RelayConfig
from relay.server import RelayServer, ShellTimings
from relay.storage import (
    MemberDeleted,
    MemberPut,
    MemoryStorage,
    OpAppended,
    RoomDeleted,
    Snapshot,
    Write,
)
from tests.sim.determinism import NODE, _time
from tests.sim.pipes import Pipe, PipeEnd, connection

log = logging.getLogger("sim.relay")

MAX_MESSAGE = w.MAX_FRAME + 4096  # as the link's real connector sets it
BUSY_BACKLOG = 4  # held ops per room past which a busy relay answers ``backlog_full``
# The shell's timings, shorter than a public relay's, so a half-open link (cut for 1-30 s) meets
# the relay's own heartbeat; the tick (hello timeouts, expiry) is coarser, for the cost of a seed.
TIMINGS = ShellTimings(ping_interval=10.0, ping_timeout=5.0, send_timeout=10.0,
                       tick_interval=5.0)
COMMIT_POINTS = ("relay.slow_commit", "relay.crash_in_commit")
# The relay's answers to a post that mean "not now" (wire/relay.py's error codes): the sender
# keeps it queued and tries again, so such a refusal makes nothing ``refused`` (truth.py).
LATER = frozenset({"rate_limited", "backlog_full"})


@attrs.frozen
class Truth:
    """One change the relay committed: ``kind`` is invite, join, drop, gone (the room) or post
    (with seq and op id)."""

    step: int
    t: float
    kind: str
    room: str
    fp: str
    seq: int = 0
    op_id: str = ""


class _Disk:
    """One relay incarnation's view of the storage that outlives it: after a crash nothing
    more is stored (as with kill -9), and every commit is recorded as ground truth."""

    def __init__(self, relay: SimRelay) -> None:
        self._relay = relay
        self.alive = True

    def load(self) -> Snapshot:
        return self._relay.storage.load()

    def commit(self, writes: Sequence[Write]) -> None:
        if not self.alive:
            return
        self._relay.storage.commit(writes)
        self._relay.committed(writes)

    def close(self) -> None:
        pass


class SimSocket:
    """The node's end of one connection: a trio-websocket client, and what the sim records of
    the frames it carries (the canary digest; the relay's refusals of posts; lies told)."""

    def __init__(self, relay: SimRelay, node: str, ws: WebSocketConnection) -> None:
        self.relay = relay
        self.node = node
        self.ws = ws
        self._posts: dict[int, str] = {}  # req -> op id of a post in flight

    async def get_message(self) -> str | bytes:
        text = await self.ws.get_message()
        assert isinstance(text, str), "the relay sends text frames"
        self.relay.digest.update(b">" + text.encode())
        if '"t":"error"' in text:
            self._note_refusal(text)
        if self.node in self.relay.lies and text.endswith('"t":"roster"}'):
            return w.encode_frame(self.relay.lie_in(self.node, w.decode_relay_frame(text)))
        return text

    async def send_message(self, message: str) -> None:
        if message.endswith('"t":"post"}'):  # cheap test first: most frames are not posts
            post = w.decode_client_frame(message)
            if isinstance(post, w.Post):
                self._posts[post.req] = post.op_id
        self.relay.digest.update(b"<" + message.encode())
        await self.ws.send_message(message)

    async def ping(self) -> None:
        await self.ws.ping()

    def _note_refusal(self, text: str) -> None:
        """Record a post the relay refused (ground truth for a sender's ``refused`` state)."""
        frame = w.decode_relay_frame(text)
        if isinstance(frame, w.Error) and frame.req in self._posts:
            # The first final answer counts: a "not now" (tried again) gives way to a later
            # final one (two relay nodes: backlog_full on one's cache, then not_a_member).
            op, codes = self._posts.pop(frame.req), self.relay.refused
            if codes.get(op, next(iter(LATER))) in LATER:
                codes[op] = frame.code


class SimRelay:
    """The relay shell, its storage, its connections and the fault knobs the world turns."""

    def __init__(self, seed: int, *, leak: bool = False,
                 count: Callable[[str], None] = lambda _: None) -> None:
        self._count = count
        self.faults_on = False
        # BUGGIFY in the commit: each point on or off for the run, then firing by chance.
        self._bug_rng = random.Random(f"{seed}/relay-buggify")
        self._bug_on = {name: self._bug_rng.random() < 0.5 for name in COMMIT_POINTS}
        self.commit_crashes = 3  # at most this many crashes mid-commit per run
        # Off in a hand-written case (tests/sim/placed.py, test_scenarios): it places its own
        # faults, and a relay dying mid-case would undo what it places.
        self.commit_faults = True
        self.key_seed = random.Random(f"{seed}/relay-key").randbytes(32)
        self._draw = random.Random(f"{seed}/relay-draw")
        self.storage = MemoryStorage(clock=_time)
        self.server: RelayServer | None = None
        self._disk: _Disk | None = None
        self._nursery: trio.Nursery | None = None
        self._down = trio.Event()  # set by a crash, for the incarnation to end
        self._up = trio.Event()  # set by a restart
        # (node, up, down, relay) of open connections: ``relay`` names the relay process that
        # serves it (one here; two relay nodes in tests/sim/nats_relay.py).
        self.pipes: list[tuple[str, Pipe, Pipe, str]] = []
        self.truth: list[Truth] = []
        # Posts the relay answered with an error and never appended: op id -> error code.
        self.refused: dict[str, str] = {}
        self.frozen = False
        self.delays: dict[str, float] = {}  # node -> one-way delay now
        self.cuts: set[str] = set()  # nodes whose links are half-open
        self.refusing: set[str] = set()  # nodes whose reconnects are refused
        self._step = 0
        self.digest = hashlib.sha256()  # every frame, both ways: part of the canary
        self.crashes = 0
        # Planted bug (tests only): keep pushing a room's ops to members the relay dropped.
        self.leak = leak
        self._dropped: dict[str, set[str]] = {}
        self.fps: dict[str, str] = {}  # node -> fingerprint (for the leak)
        self.replay_window: int | None = None  # a placed case's (the relay's default if None)
        # The relay as an adversary about membership (faults.py, kind "lie"): node -> mode, the
        # rows it put a removed member back into, and every room a lie touched (where members
        # may rightly say the relay offered something that does not verify).
        self.lies: dict[str, str] = {}
        self._readded: set[tuple[str, str, str]] = set()  # (node, room, fingerprint)
        self.lied_rooms: set[str] = set()
        # Busy (faults.py, kind "busy"): for a while the core's backlog cap is low, so posts to
        # a room with a few ops held meet ``backlog_full``; the sender must try them again.
        self._busy = False

    @property
    def core(self) -> RelayCore | None:
        """The running incarnation's core (None while the relay is down)."""
        return self.server.core if self.server is not None else None

    def delay_for(self, node: str) -> float:
        return self.delays.get(node, 0.0)

    # --- the relay process ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run relay incarnations until the world ends: each lasts until a crash, the next
        starts at the restart, from what storage holds."""
        NODE.set("relay")
        while True:
            self._disk = _Disk(self)
            # No proof of work: the simulation runs on virtual time, and a thread's CPU time is
            # not in it (the real relay's e2e tests pay it).
            self.server = RelayServer(
                self._disk, self.key_seed, config=self._config(), timings=TIMINGS,
                wall_clock=_relay_now, draw=self._draw.randbytes, run_commit=self._run_commit,
            )
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    await nursery.start(self.server.run)
                    task_status.started()
                    task_status = trio.TASK_STATUS_IGNORED
                    await self._down.wait()
                    nursery.cancel_scope.cancel()
            except BaseExceptionGroup:
                # What a crashed incarnation's tasks raise while they are torn down (seed 289:
                # trio-websocket answering a ping after its close frame) is not the relay's:
                # a killed process raises nothing. A live one's errors propagate.
                if not self._down.is_set():
                    raise
            self._down, self._nursery, self.server = trio.Event(), None, None
            await self._up.wait()
            self._up = trio.Event()

    def _config(self) -> RelayConfig:
        # Every simulated connection reaches the relay from one source address ("unknown": no
        # socket under the stream), where real people pair from many: the per-source slot
        # bucket would refuse the harness's own pairings and the real ones together (seeds 19
        # and 99 once the shell's admission met the real pairing flow). Per-identity limits stay.
        cfg = RelayConfig(slot_work_bits=0, slot_burst=10_000.0, max_slots_per_source=10_000)
        if self.replay_window is not None:
            cfg = attrs.evolve(cfg, replay_window=self.replay_window)
        return attrs.evolve(cfg, max_backlog=BUSY_BACKLOG) if self._busy else cfg

    @property
    def busy(self) -> bool:
        return self._busy

    @busy.setter
    def busy(self, on: bool) -> None:
        self._busy = on
        self._reconfigure()

    def _reconfigure(self) -> None:
        """Hand the running shell's core the limits ``busy`` now asks for."""
        if self.server is not None:
            self.server.core.config = self._config()

    async def _run_commit(self, writes: list[Write], commit: Callable[[], None]) -> None:
        """The shell's commit, inline on virtual time: sometimes slow, and sometimes (a batch
        with a post in it: the acknowledgement that must not leave first) the relay dies
        while it is under way, so nothing of the batch is stored."""
        posts = any(type(x) is OpAppended for x in writes)
        if posts and self.commit_crashes and self._fires("relay.crash_in_commit", 0.03):
            self.commit_crashes -= 1
            await trio.sleep(self._bug_rng.uniform(0.001, 0.3))  # the fsync under way ...
            self.crash()  # ... never returns
            await trio.sleep_forever()  # cancelled with the rest of the incarnation
        if self._fires("relay.slow_commit", 0.05):
            await trio.sleep(self._bug_rng.uniform(0.001, 0.3))
        commit()

    def _fires(self, name: str, chance: float) -> bool:
        if not (self.faults_on and self.commit_faults and self._bug_on[name]
                and self._bug_rng.random() < chance):
            return False
        self._count(f"buggify:{name}")
        return True

    def committed(self, writes: Sequence[Write]) -> None:
        """A batch reached storage: record it (one relay step); the leak plant acts here."""
        self._record(writes)
        if self.leak:
            for e in writes:
                if isinstance(e, OpAppended):
                    self._leak(e)

    def _leak(self, e: OpAppended) -> None:
        server, gone = self.server, self._dropped.get(e.room, set())
        if server is None or not gone:
            return
        op = w.Op(e.room, e.op.seq, e.op.sender, e.op.op_id, e.op.body, e.op.ts)
        sends = [Send(conn, op) for conn in sorted(server.core._conns)
                 if server.core.identity_of(conn) in gone]
        server._dispatch(sends)  # type: ignore[arg-type]  # Send is an Effect

    def _record(self, writes: Sequence[object]) -> None:
        self._step += 1
        now = trio.current_time()
        for e in writes:
            if isinstance(e, MemberPut) and e.member.state == "joined":
                self._dropped.get(e.room, set()).discard(e.member.fingerprint)
                self.truth.append(Truth(self._step, now, "join", e.room, e.member.fingerprint))
            elif isinstance(e, MemberPut):
                self.truth.append(Truth(self._step, now, "invite", e.room, e.member.fingerprint))
            elif isinstance(e, MemberDeleted):
                self._dropped.setdefault(e.room, set()).add(e.fingerprint)
                self.truth.append(Truth(self._step, now, "drop", e.room, e.fingerprint))
            elif isinstance(e, RoomDeleted):
                self.truth.append(Truth(self._step, now, "gone", e.room, ""))
            elif isinstance(e, OpAppended):
                self.truth.append(
                    Truth(self._step, now, "post", e.room, e.op.sender, e.op.seq, e.op.op_id)
                )
        if log.isEnabledFor(logging.INFO):  # SIM_LOG (tests/sim/debuglog.py)
            for t in self.truth[-len(writes):]:
                if t.step == self._step:
                    log.info("%s room %s %s seq %s op %s%s", t.kind, t.room[:8], t.fp[:9],
                             t.seq, t.op_id[:8], self._epoch_note(writes, t))

    @staticmethod
    def _epoch_note(writes: Sequence[object], t: Truth) -> str:
        for e in writes:
            if isinstance(e, OpAppended) and e.op.op_id == t.op_id and e.room == t.room:
                try:
                    return f" epoch {unframe_body(e.op.body)[0]}"
                except Exception:
                    return " epoch ?"
        return ""

    # --- lies --------------------------------------------------------------------------------

    def lie(self, node: str, fp: str, mode: str) -> None:
        """Start lying to (``replay``, ``reorder``) or about (``readd``) ``node``."""
        self.lies[node] = mode
        if mode == "readd" and self.core is not None:
            book = self.core._rooms
            for room, state in sorted(book.rooms.items()):
                member = state.departed.get(fp)
                if member is None or fp in state.members:
                    continue
                del state.departed[fp]
                state.members[fp] = attrs.evolve(member, state="joined")
                book.member_of.setdefault(fp, set()).add(room)
                self._readded.add((node, room, fp))
                self.lied_rooms.add(room)
            self.drop(node)  # its next link-up finds it joined again

    def stop_lying(self, node: str) -> None:
        """Stop; rows put back are taken out again (as long as the history does not list them:
        the lie is in the rows, and honest changes since are in the history)."""
        self.lies.pop(node, None)
        if self.core is None:  # the rows died with the core: a restart loads honest ones
            self._readded.clear()
            return
        book = self.core._rooms
        mine = {(n, r, f) for n, r, f in self._readded if n == node}
        self._readded -= mine
        for _, room, fp in sorted(mine):
            state = book.rooms.get(room)
            entry = state.history.members.get(fp) if state is not None else None
            if state is None or fp not in state.members or (
                    entry is not None and entry.state != "left"):
                continue
            member = state.members.pop(fp)
            state.departed[fp] = attrs.evolve(member, state="left")
            rooms = book.member_of.get(fp, set())
            rooms.discard(room)
            for device in book.devices.get(fp, ()):
                book.cursors.pop((fp, device, room), None)

    def lie_in(self, node: str, frame: w.RelayFrame) -> w.RelayFrame:
        """``frame`` as a lying relay tells it to ``node``."""
        mode = self.lies.get(node)
        if mode is None or not isinstance(frame, w.Roster) or self.core is None:
            return frame
        state = self.core._rooms.rooms.get(frame.room)
        if mode == "replay" and state is not None and len(state.statements) >= 2:
            self.lied_rooms.add(frame.room)
            return attrs.evolve(frame, chain=[*frame.chain, state.statements[1]])
        if mode == "reorder" and len(frame.chain) >= 2:
            self.lied_rooms.add(frame.room)
            return attrs.evolve(frame, chain=frame.chain[::-1])
        return frame

    # --- faults ------------------------------------------------------------------------------

    def drop(self, node: str | None = None) -> None:
        """End ``node``'s connections (every connection with None), as a network that cuts
        them would: each side sees the end once what is under way has arrived."""
        for who, up, down, _ in self.pipes:
            if node is None or who == node:
                up.end()
                down.end()

    def refuse(self, node: str) -> None:
        """Refuse ``node``'s reconnects (until :meth:`mend`)."""
        self.refusing.add(node)

    def cut(self, node: str) -> None:
        """``node``'s link goes half-open: its bytes are held both ways, reconnects refused."""
        self.cuts.add(node)
        self.refusing.add(node)

    def mend(self, node: str | None = None) -> None:
        """``node``'s link (every link with None) carries bytes again and may reconnect."""
        if node is None:
            self.cuts.clear()
            self.refusing.clear()
        else:
            self.cuts.discard(node)
            self.refusing.discard(node)
        self._wake()

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False
        self._wake()

    def _wake(self) -> None:
        for _, up, down, _ in self.pipes:
            up.wake()
            down.wake()

    def crash(self) -> None:
        """The relay process dies: every connection is reset at once, nothing more is stored,
        the core's memory is lost."""
        if self.server is None or self._down.is_set():
            return  # already down (overlapping crash faults)
        self.crashes += 1
        self.frozen = False
        assert self._disk is not None and self._nursery is not None
        self._disk.alive = False
        self._nursery.cancel_scope.cancel()
        self._down.set()
        for _, up, down, _ in self.pipes:
            up.break_()
            down.break_()

    def restart(self) -> None:
        """A new relay process, from what its storage committed (if it is down)."""
        if self._down.is_set() or self.server is None:
            self._up.set()

    @property
    def down(self) -> bool:
        return self._down.is_set() or self.server is None

    # --- the connect seam --------------------------------------------------------------------

    @asynccontextmanager
    async def connect(self, url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
        """The relay link's ``connect``: a new connection from the calling node, served by the
        relay shell's ``handle_stream`` as an accepted TCP stream would be."""
        del url
        node = NODE.get()
        await trio.lowlevel.checkpoint()
        serving = self._accepting(node)
        if serving is None or node in self.refusing:
            raise OSError("connection refused")
        nursery, server, name = serving
        mine, theirs, (up, down) = connection(lambda: self.delay_for(node),
                                              lambda: self.frozen or node in self.cuts)
        entry = (node, up, down, name)
        self.pipes.append(entry)
        nursery.start_soon(self._serve, server, name, theirs)
        try:
            async with trio.open_nursery() as client:
                with trio.fail_after(timings.connect_timeout):
                    ws = await wrap_client_stream(
                        client, mine, "relay", "/ws",  # type: ignore[arg-type]  # any Stream
                        max_message_size=MAX_MESSAGE,
                    )
                try:
                    yield SimSocket(self, node, ws)
                finally:
                    with trio.move_on_after(timings.disconnect_timeout):
                        await ws.aclose()
                    client.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The link expects what trio-websocket's own open_websocket_url raises: the one
            # error, not the nursery's group of it (seed 134: a connect timeout).
            raise _one_error(group) from None
        finally:
            self.pipes.remove(entry)
            await trio.aclose_forcefully(mine)

    def _accepting(self, node: str) -> tuple[trio.Nursery, RelayServer, str] | None:
        """Where a new connection from ``node`` lands: the running relay's nursery, its shell
        and its name (None while it is down)."""
        del node  # one relay serves everyone
        if self._nursery is None or self.server is None or self.down:
            return None
        return self._nursery, self.server, "relay"

    async def _serve(self, server: RelayServer, name: str, stream: PipeEnd) -> None:
        NODE.set(name)
        await server.handle_stream(stream)


def _one_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The single error in ``group`` (nested groups flattened), else the group itself."""
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 else group


def _relay_now() -> float:
    token = NODE.set("relay")
    try:
        return _time()
    finally:
        NODE.reset(token)
