"""The relay in the simulation: the real ``RelayCore`` and its storage behind in-memory sockets.

Frame tier (simulation.md §2): each client connection is a :class:`SimSocket` handed to the
relay link through its ``connect`` seam. The relay shell here does what ``relay/server.py`` does
with effects (every ``Write`` of a batch committed to storage before any ``Send`` of it leaves) and
records, in that one commit order, the ground truth the checkers use: joins, drops and posts.

Faults: per-connection delays (FIFO: a frame is never delivered before the one sent before it),
dropping a connection, freezing the relay (frames wait, pings hang) and crashing it (every socket
dies, the core is rebuilt from ``storage.load()``).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import trio
from nacl.signing import SigningKey
from trio_websocket import ConnectionClosed

from crosstalk.actors.relay_link import LinkTimings, RelaySocket
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import unframe_body
from relay.core import RelayCore
from relay.effects import Close, Send
from relay.limits import RelayConfig
from relay.storage import MemberDeleted, MemberPut, MemoryStorage, OpAppended, RoomDeleted
from tests.sim.determinism import NODE, _time

log = logging.getLogger("sim.relay")


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


class SimSocket:
    """One client connection: FIFO, optionally delayed, both ways."""

    def __init__(self, relay: SimRelay, conn: int, node: str) -> None:
        self.relay = relay
        self.conn = conn
        self.node = node
        self.closed = False
        self._send, self._receive = trio.open_memory_channel[tuple[float, str | None]](10_000)
        self._due = 0.0  # when the last queued frame is delivered (FIFO floor)

    def deliver(self, text: str | None) -> None:
        """Queue a frame (None: end of stream) from the relay; it arrives after the link delay."""
        if self.closed:
            return
        due = max(self._due, trio.current_time() + self.relay.delay_for(self.node))
        self._due = due
        self._send.send_nowait((due, text))

    async def get_message(self) -> str:
        due, text = await self._receive.receive()
        await trio.sleep_until(due)
        if text is None or self.closed:
            self.closed = True
            raise ConnectionClosed(None)
        return text

    async def send_message(self, message: str) -> None:
        delay = self.relay.delay_for(self.node)
        if delay:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()
        if self.closed:
            raise ConnectionClosed(None)
        self.relay.received(self.conn, message)

    async def ping(self) -> None:
        if self.relay.frozen or self.relay.cut(self.node):
            await trio.sleep_forever()
        await trio.sleep(2 * self.relay.delay_for(self.node))
        if self.closed:
            raise ConnectionClosed(None)


class SimRelay:
    """The relay core, its storage, its sockets and the fault knobs the world turns."""

    def __init__(self, seed: int, *, leak: bool = False) -> None:
        self.key = SigningKey(random.Random(f"{seed}/relay-key").randbytes(32))
        self._draw = random.Random(f"{seed}/relay-draw")
        self.storage = MemoryStorage(clock=_time)
        self.core: RelayCore | None = self._new_core()
        self.sockets: dict[int, SimSocket] = {}
        self.truth: list[Truth] = []
        # Posts the relay answered with an error and never appended: op id -> error code.
        self.refused: dict[str, str] = {}
        self.frozen = False
        self._parked: list[tuple[int, str]] = []
        self.delays: dict[str, float] = {}  # node -> one-way delay now
        self.cuts: set[str] = set()  # nodes whose links are frozen (half-open)
        self._next = 0
        self._step = 0
        self.digest = hashlib.sha256()  # every frame, both ways: part of the canary
        self.crashes = 0
        # Planted bug (tests only): keep pushing a room's ops to members the relay dropped.
        self.leak = leak
        self._dropped: dict[str, set[str]] = {}
        self.fps: dict[str, str] = {}  # node -> fingerprint (for the leak)
        # The relay as an adversary about membership (faults.py, kind "lie"): node -> mode, the
        # rows it put a removed member back into, and every room a lie touched (where members
        # may rightly say the relay offered something that does not verify).
        self.lies: dict[str, str] = {}
        self._readded: set[tuple[str, str, str]] = set()  # (node, room, fingerprint)
        self.lied_rooms: set[str] = set()
        # Busy (faults.py, kind "busy"): for a while, about every other post is turned away
        # with ``backlog_full``, as a relay under load does; the sender must try it again.
        self.busy = False
        self._busy_rng = random.Random(f"{seed}/busy-posts")

    def _new_core(self) -> RelayCore:
        # No proof of work: the simulation runs on virtual time, and a thread's CPU time is
        # not in it (the real relay's e2e tests pay it).
        return RelayCore(
            signing_key=self.key, draw=self._draw.randbytes, snapshot=self.storage.load(),
            config=RelayConfig(slot_work_bits=0),
        )

    def delay_for(self, node: str) -> float:
        return self.delays.get(node, 0.0)

    def cut(self, node: str) -> bool:
        return node in self.cuts

    # --- the shell ---------------------------------------------------------------------------

    def received(self, conn: int, text: str) -> None:
        if self.frozen:
            self._parked.append((conn, text))
            return
        self.digest.update(b"<" + text.encode())
        if self.core is not None:
            if self.busy and text.endswith('"t":"post"}') and self._turn_away(conn, text):
                return
            effects = self.core.frame_received(conn, text, _relay_now())
            if text.endswith('"t":"post"}'):  # cheap test first: most frames are not posts
                self._note_refusal(conn, text, effects)
            self._apply(effects)

    def _turn_away(self, conn: int, text: str) -> bool:
        """Maybe answer a post ``backlog_full`` without the core seeing it (not a refusal the
        truth counts: the code says "later")."""
        post = w.decode_client_frame(text)
        if not isinstance(post, w.Post) or self._busy_rng.random() < 0.5:
            return False
        self._apply([Send(conn, w.Error(post.req, "backlog_full", "the room's backlog is full"))])
        return True

    def _note_refusal(self, conn: int, text: str, effects: Sequence[object]) -> None:
        """Record a post the relay refused (ground truth for a sender's ``refused`` state)."""
        post = w.decode_client_frame(text)
        if not isinstance(post, w.Post):
            return
        for e in effects:
            if (isinstance(e, Send) and e.conn == conn and isinstance(e.frame, w.Error)
                    and e.frame.req == post.req):
                self.refused.setdefault(post.op_id, e.frame.code)

    def _apply(self, effects: Sequence[object]) -> None:
        writes = [e for e in effects if not isinstance(e, Send | Close)]
        if writes:
            self.storage.commit(writes)  # type: ignore[arg-type]  # Write is a Union alias
            self._record(writes)
        for effect in effects:
            if isinstance(effect, Send) and effect.conn in self.sockets:
                frame = self._lie_in(self.sockets[effect.conn].node, effect.frame)
                text = w.encode_frame(frame)
                self.digest.update(b">" + text.encode())
                self.sockets[effect.conn].deliver(text)
                if self.leak and isinstance(effect.frame, w.Op):
                    self._leak(effect.frame.room, text)
            elif isinstance(effect, Close) and effect.conn in self.sockets:
                self.sockets[effect.conn].deliver(None)

    def _leak(self, room: str, text: str) -> None:
        gone = self._dropped.get(room, set())
        for sock in list(self.sockets.values()):
            if self.fps.get(sock.node) in gone:
                sock.deliver(text)

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

    def _lie_in(self, node: str, frame: w.RelayFrame) -> w.RelayFrame:
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
        """End ``node``'s connections (every connection with None) from the relay's side."""
        for sock in list(self.sockets.values()):
            if node is None or sock.node == node:
                sock.deliver(None)

    def freeze(self) -> None:
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False
        parked, self._parked = self._parked, []
        for conn, text in parked:
            if conn in self.sockets:
                self.received(conn, text)

    def crash(self) -> None:
        """The relay process dies: sockets go dead at once, the core's memory is lost."""
        if self.core is None:
            return  # already down (overlapping crash faults)
        self.crashes += 1
        self.core = None
        self._parked.clear()
        self.frozen = False
        for sock in list(self.sockets.values()):
            sock.deliver(None)
            sock.closed = True

    def restart(self) -> None:
        """A new relay process, from what its storage committed (if it is down)."""
        if self.core is None:
            self.core = self._new_core()

    # --- the connect seam --------------------------------------------------------------------

    @asynccontextmanager
    async def connect(self, url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
        """The relay link's ``connect``: a new connection from the calling node."""
        del url, timings
        node = NODE.get()
        await trio.lowlevel.checkpoint()
        core = self.core
        if core is None or node in self.cuts:
            raise OSError("connection refused")
        self._next += 1
        conn = self._next
        sock = self.sockets[conn] = SimSocket(self, conn, node)
        self._apply(core.connection_opened(conn, node, _relay_now()))
        try:
            yield sock
        finally:
            sock.closed = True
            del self.sockets[conn]
            if self.core is core:  # a crashed core's connections died with it
                self._apply(core.connection_closed(conn, _relay_now()))


def _relay_now() -> float:
    token = NODE.set("relay")
    try:
        return _time()
    finally:
        NODE.reset(token)
