"""The relay's rules, with no I/O: connections, authentication, rooms, the log, slots, presence.

Theory of operation
-------------------
The shell owns sockets, clocks, randomness and storage. It feeds :class:`RelayCore` with what
happened (``connection_opened``, ``frame_received``, ``connection_closed``, ``tick``; ``now`` is
wall-clock seconds, because retention and op timestamps must survive restarts) and carries out the
returned effects in order: every :data:`~relay.storage.Write` in a batch is committed before any
:class:`~relay.effects.Send` of that batch goes out, which is how "acknowledged only after commit"
holds for ``posted``, pushes and roster changes alike.

A connection is AWAIT_HELLO until a ``hello`` verifies against the challenge it was sent, then
READY; CLOSING once the core has asked the shell to close it. Before READY every frame is an
``unauthenticated`` error and changes nothing. The identity of a connection is the fingerprint of
the key that signed its hello; no frame field can claim another. A connection receives live ``op``
pushes only after its first ``resume`` (the replay and the switch to live happen in one step, so
nothing is missed or reordered in between; a long replay goes a window at a time as the device
acknowledges, :mod:`relay.replay`); roster, invitation, presence and slot pushes flow as
soon as it is READY. Pairing slots and grants live in :mod:`relay.slots` and are durable like
rooms (their writes come first in a batch); a snapshot restores them.

Every handler validates before it mutates, so a refused request leaves no trace but its error
frame. Room membership requests are handled by :class:`~relay.members.MemberDesk`, which the core
owns; connections and the signature checks are :mod:`relay.conn`'s. Malformed frames,
unauthenticated frames and version mismatches count as misbehaviour; ``max_bad_frames`` of them
close that connection and nothing else.

Limits a stranger with free identities cannot get around: authenticated connections per source
address (an IPv6 /64 is one, :func:`~relay.limits.source_key`), per identity and in all, the
idlest shed first (:mod:`relay.crowd`); slot opens and joins per address and per identity
(:mod:`relay.slots`); a proof of work for a slot between strangers (:mod:`relay.work`). A device
is stored only once its identity is in a room (create and accept store the devices of its
connections), so a throwaway identity leaves nothing behind.

Presence: an identity is online while it has a READY connection. Changes are pushed only to
identities that share a room with it where both are joined, and a newly shared room exchanges the
current presence both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from nacl.signing import SigningKey

from crosstalk.crypto import fingerprint
from crosstalk.errors import RemoteProtocolError
from crosstalk.wire import relay as w
from relay import replica
from relay.conn import MISBEHAVIOUR, Conn, ConnState, RelayStats, verify_sig
from relay.crowd import Crowd, CrowdLimits
from relay.effects import Close, Effect, Send
from relay.limits import Buckets, RelayConfig, source_key
from relay.members import MemberDesk
from relay.replay import replay_more
from relay.rooms import RoomBook, check_id, refuse
from relay.slots import PairingDesk, Peer
from relay.storage import OpAppended, Snapshot, Write
from relay.work import WorkDesk


class RelayCore:
    """All relay rules. See the module docstring for how a shell drives it."""

    def __init__(
        self,
        *,
        signing_key: SigningKey,
        draw: Callable[[int], bytes],
        config: RelayConfig | None = None,
        snapshot: Snapshot | None = None,
    ) -> None:
        self.config = config or RelayConfig()
        self._key = signing_key
        self._relay_pub = bytes(signing_key.verify_key)
        self._draw = draw
        self._conns: dict[int, Conn] = {}
        self._by_identity: dict[str, set[int]] = {}
        # Identities online on other relay nodes (a stateless node learns them over NATS).
        self._elsewhere: set[str] = set()
        self._rooms = RoomBook()
        if snapshot is not None:
            self._rooms.load(snapshot)
        cfg = self.config
        self._pairing = PairingDesk(cfg, draw, snapshot)
        self._crowd = Crowd(CrowdLimits(cfg.max_per_source, cfg.max_per_identity,
                                        cfg.max_authenticated))
        self._work = WorkDesk(cfg.slot_work_bits, draw, self._known, self._pairing.owner_of)
        self._op_buckets = Buckets(cfg.op_rate, cfg.op_burst)
        self._ops_in = 0
        self._ops_out = 0
        self._errors: dict[str, int] = {}
        # Connections still owing a hello, oldest first (dicts keep insertion order), overall
        # and per source address: the shedding order of ``_admit``.
        self._waiting: dict[int, Conn] = {}
        self._waiting_by_source: dict[str, dict[int, None]] = {}
        self.shed = 0
        m = self._members = MemberDesk(
            self._rooms, self._pairing, push=self._push, introduce=self._introduce
        )
        self._handlers: dict[type, Callable[[Conn, Any, float, list[Effect]], None]] = {
            w.Create: self._registering(m.create), w.Add: m.add,
            w.Accept: self._registering(m.accept), w.Decline: m.decline,
            w.Leave: m.leave, w.Remove: m.remove, w.GetRoster: m.roster,
            w.ListRooms: m.list_rooms, w.Post: self._post,
            w.Ack: self._ack, w.Resume: self._resume, w.SlotOpen: self._slot,
            w.SlotJoin: self._slot, w.SlotAttach: self._slot, w.SlotSend: self._slot,
            w.SlotClose: self._slot, w.WorkAsk: self._work_ask,
        }

    # --- events from the shell -----------------------------------------------------------------

    def connection_opened(self, conn: int, source: str, now: float) -> list[Effect]:
        """A socket was accepted from ``source`` (its address); greet it with a challenge."""
        nonce = self._draw(w.NONCE_SIZE)
        c = self._conns[conn] = Conn(conn, source_key(source), nonce, opened_at=now)
        out: list[Effect] = [Send(conn, w.Challenge(nonce, self._relay_pub, w.PROTOCOL_VERSION))]
        self._admit(c, out)
        return out

    def _admit(self, c: Conn, out: list[Effect]) -> None:
        """Count ``c`` as waiting for its hello; shed the oldest waiting one past a cap."""
        cfg = self.config
        self._waiting[c.id] = c
        mine = self._waiting_by_source.setdefault(c.source, {})
        mine[c.id] = None
        if len(mine) > cfg.max_unauthenticated_per_source:
            reason = "too many connections from your address have not authenticated"
            self._shed(self._waiting[next(iter(mine))], reason, out)
        if len(self._waiting) > cfg.max_unauthenticated:
            reason = "the relay holds too many connections that have not authenticated"
            self._shed(next(iter(self._waiting.values())), reason, out)

    def _stop_waiting(self, c: Conn) -> None:
        if self._waiting.pop(c.id, None) is None:
            return
        mine = self._waiting_by_source.get(c.source)
        if mine is not None:
            mine.pop(c.id, None)
            if not mine:
                del self._waiting_by_source[c.source]

    def _shed_ready(self, c: Conn, out: list[Effect]) -> None:
        """Close an authenticated connection the crowd let go (relay.crowd says which)."""
        c.state = ConnState.CLOSING
        self.shed += 1
        out.append(Close(c.id, "too many connections from your address or identity; this was "
                               "the idlest"))

    def _shed(self, c: Conn, reason: str, out: list[Effect]) -> None:
        self._stop_waiting(c)
        c.state = ConnState.CLOSING
        self.shed += 1
        out.append(Close(c.id, reason))

    def frame_received(self, conn: int, text: str | bytes, now: float,
                       decoded: w.ClientFrame | None = None) -> list[Effect]:
        """One WebSocket message arrived on ``conn``; ``decoded`` is ``text`` already decoded,
        if the caller did (a relay node decodes a frame to find its room first)."""
        c = self._conns.get(conn)
        if c is None or c.state is ConnState.CLOSING:
            return []
        out: list[Effect] = []
        req: int | None = None
        try:
            frame = decoded if decoded is not None else w.decode_client_frame(text)
            req = getattr(frame, "req", None)
            if c.state is ConnState.AWAIT_HELLO:
                if not isinstance(frame, w.Hello):
                    raise refuse("unauthenticated", "answer the challenge with hello first")
                self._hello(c, frame, out)
            elif isinstance(frame, w.Hello):
                raise refuse("bad_frame", "this connection is already authenticated")
            else:
                self._crowd.active(conn)
                self._handlers[type(frame)](c, frame, now, out)
        except RemoteProtocolError as exc:
            self._error(c, req, exc, out)
        return out

    def connection_closed(self, conn: int, now: float) -> list[Effect]:
        """The socket is gone (closed by either side, or dead)."""
        c = self._conns.pop(conn, None)
        out: list[Effect] = []
        if c is None:
            return out
        self._stop_waiting(c)
        self._crowd.left(conn)
        self._pairing.detach(conn)
        if c.peer is not None:
            conns = self._by_identity.get(c.fp, set())
            conns.discard(conn)
            if not conns:
                self._by_identity.pop(c.fp, None)
                if c.fp not in self._elsewhere:
                    self._announce(c.fp, False, out)
        return out

    def tick(self, now: float) -> list[Effect]:
        """Periodic upkeep: retention, slot expiry, forgetting idle rate buckets."""
        out: list[Effect] = list(self._rooms.expire(now - self.config.retention))
        while self._waiting:  # oldest first: stop at the first still within its deadline
            oldest = next(iter(self._waiting.values()))
            if now - oldest.opened_at < self.config.hello_timeout:
                break
            limit = f"{self.config.hello_timeout:g}"
            self._shed(oldest, f"no authenticated hello within {limit} s", out)
        self._pairing.tick(now, out)
        self._op_buckets.sweep(now)
        return out

    def statistics(self) -> RelayStats:
        ready = sum(1 for c in self._conns.values() if c.peer is not None)
        return RelayStats(
            connections=len(self._conns), authenticated=ready,
            identities=len(self._by_identity), rooms=len(self._rooms.rooms),
            held_ops=self._rooms.held_ops(), held_bytes=self._rooms.held_bytes(),
            slots=len(self._pairing.table.slots), ops_in=self._ops_in, ops_out=self._ops_out,
            errors=dict(self._errors), shed=self.shed,
        )

    # --- a stateless node (relay.node): what other nodes did --------------------------------

    def presence_elsewhere(self, fp: str, online: bool) -> list[Effect]:
        """``fp`` came online (or went offline) on another relay node."""
        out: list[Effect] = []
        was = self._online(fp)
        if online:
            self._elsewhere.add(fp)
        else:
            self._elsewhere.discard(fp)
        if was != self._online(fp):
            self._announce(fp, online, out)
        return out

    def stored_elsewhere(self, writes: list[Write], by: str) -> list[Effect]:
        """Another node stored ``writes`` (one message); raises ``replica.Gap`` if this node
        missed something before it."""
        out: list[Effect] = []
        replica.apply_stored(self._rooms, self._pairing.table, writes, by, self._push,
                             self._push_live, self._introduce_elsewhere, out)
        return out

    def knows_device(self, fp: str, device: str) -> bool:
        return device in self._rooms.devices.get(fp, ())

    def limit_pruning(self, limit: Callable[[str], int]) -> None:
        """Prune a room for acknowledgement only through ``limit(room)`` (a relay node)."""
        self._rooms.prune_limit = limit

    def reload(self, unit: str, snapshot: Snapshot) -> list[Effect]:
        """Replace the cached state of ``unit`` with ``snapshot``, freshly loaded."""
        out: list[Effect] = []
        replica.replace_unit(self._rooms, self._pairing.table, unit, snapshot, self._push,
                             self._push_live, self._introduce_elsewhere, out)
        return out

    def identities(self) -> set[str]:
        """The identities with an authenticated connection here."""
        return set(self._by_identity)

    def identity_of(self, conn: int) -> str | None:
        c = self._conns.get(conn)
        return c.fp if c is not None and c.peer is not None else None

    def _online(self, fp: str) -> bool:
        return fp in self._by_identity or fp in self._elsewhere

    def _push_live(self, fps: Iterable[str], frame: w.RelayFrame, out: list[Effect]) -> None:
        room = frame.room if isinstance(frame, w.Op) else None  # replayed in turn (relay.replay)
        for fp in fps:
            for cid in self._by_identity.get(fp, ()):
                conn = self._conns[cid]
                if conn.live and (room is None or room not in conn.replay):
                    out.append(Send(cid, frame))
                    self._ops_out += 1

    # --- helpers -------------------------------------------------------------------------------

    def _error(self, c: Conn, req: int | None, exc: RemoteProtocolError, out: list[Effect]) -> None:
        code = exc.hint or "bad_frame"
        self._errors[code] = self._errors.get(code, 0) + 1
        out.append(Send(c.id, w.Error(req, code, exc.message)))
        if code in MISBEHAVIOUR:
            c.bad += 1
            if c.bad >= self.config.max_bad_frames:
                self._stop_waiting(c)
                c.state = ConnState.CLOSING
                out.append(Close(c.id, "too many malformed or unauthenticated frames"))

    def _push(self, fps: Iterable[str], frame: w.RelayFrame, out: list[Effect]) -> None:
        for fp in fps:
            out.extend(Send(cid, frame) for cid in self._by_identity.get(fp, ()))

    def _announce(self, fp: str, online: bool, out: list[Effect]) -> None:
        self._push(self._rooms.peers(fp), w.Presence(fp, online), out)

    def _introduce_elsewhere(self, fp: str, others: Iterable[str], out: list[Effect]) -> None:
        """``fp`` newly shares a room with ``others`` by another node's change: introduce them
        if ``fp`` is online (here or on another node)."""
        if self._online(fp):
            self._introduce(fp, others, out)

    def _introduce(self, fp: str, others: Iterable[str], out: list[Effect]) -> None:
        """Exchange presence between ``fp`` (online) and each online identity in ``others``."""
        online = [peer for peer in others if self._online(peer)]
        for peer in online:
            self._push([fp], w.Presence(peer, True), out)
        # One frame for all of them: the shell encodes a frame object once (a room of n).
        self._push(online, w.Presence(fp, True), out)

    # --- handshake -----------------------------------------------------------------------------

    def _hello(self, c: Conn, f: w.Hello, out: list[Effect]) -> None:
        if f.version != w.PROTOCOL_VERSION:
            raise refuse("version", f"this relay speaks protocol {w.PROTOCOL_VERSION}")
        if len(f.ed_pub) != 32 or len(f.x_pub) != 32:
            raise refuse("bad_frame", "ed_pub and x_pub must be 32 bytes")
        check_id(f.device, "device")
        transcript = w.hello_transcript(
            c.nonce, self._relay_pub, f.ed_pub, f.x_pub, f.device, f.version
        )
        verify_sig(
            f.ed_pub, transcript, f.sig, "unauthenticated", "hello signature does not verify"
        )
        c.peer = Peer(fingerprint(f.ed_pub), f.ed_pub, f.x_pub)
        c.device = f.device
        c.state = ConnState.READY
        self._stop_waiting(c)
        ready = w.ready_transcript(c.nonce, self._relay_pub, f.ed_pub, f.x_pub)
        out.append(Send(c.id, w.Ready(c.fp, self._key.sign(ready).signature)))
        # A device is stored only once its identity is in a room (or joins one: _registering):
        # a throwaway identity that never joins anything leaves nothing behind when it goes.
        if c.fp in self._rooms.member_of:
            out.extend(self._rooms.device_seen(c.fp, c.device))
        for idle in self._crowd.arrived(c.id, c.source, c.fp):
            self._shed_ready(self._conns[idle], out)
        first = not self._online(c.fp)
        self._by_identity.setdefault(c.fp, set()).add(c.id)
        peers = self._rooms.peers(c.fp)
        if first:
            self._push(peers, w.Presence(c.fp, True), out)
        out.extend(Send(c.id, w.Presence(p, True)) for p in sorted(peers) if self._online(p))

    # --- rooms ---------------------------------------------------------------------------------

    def _slot(self, c: Conn, f: w.ClientFrame, now: float, out: list[Effect]) -> None:
        assert c.peer is not None
        if isinstance(f, w.SlotOpen | w.SlotJoin):
            self._pairing.admit(c.fp, c.source, f, now)  # rate limits first: they are cheaper
            self._work.check(c, f)
        self._pairing.handle(c.id, c.peer, c.source, f, now, out)

    def _work_ask(self, c: Conn, f: w.WorkAsk, now: float, out: list[Effect]) -> None:
        out.append(Send(c.id, self._work.ask(c, f)))

    def _known(self, fp: str) -> bool:
        """Whether ``fp`` shares a room, both joined, with anyone here (not a stranger)."""
        return bool(self._rooms.peers(fp))

    def _registering(self, handler: Callable[[Conn, Any, float, list[Effect]], None]
                     ) -> Callable[[Conn, Any, float, list[Effect]], None]:
        """``handler`` (create, accept: the requests that make an identity a member), after
        storing the devices of the identity's connections here that were not stored yet."""
        def registered(c: Conn, f: Any, now: float, out: list[Effect]) -> None:
            # Written every time, not only when new to memory: a refused request drops them
            # (below), and a relay node whose write lost its compare-and-set decides again.
            before = len(out)
            for cid in self._by_identity.get(c.fp, ()):
                out.extend(self._rooms.device_stored(c.fp, self._conns[cid].device))
            try:
                handler(c, f, now, out)
            except RemoteProtocolError:
                del out[before:]  # a refused request leaves no trace but its error
                raise
        return registered

    # --- the log -------------------------------------------------------------------------------

    def _post(self, c: Conn, f: w.Post, now: float, out: list[Effect]) -> None:
        if not 1 <= len(f.op_id) <= 128:
            raise refuse("bad_frame", "op_id must be 1-128 characters")
        # A retried post: the same answer, stored once. Asked before membership: a member
        # removed after its op was sequenced, whose answer was lost, must hear that it was
        # (sim seed 5249: it was told refused, and the others had read it).
        held = self._rooms.own_seq(f.room, c.fp, f.op_id)
        if held is not None:
            out.append(Send(c.id, w.Posted(f.req, f.room, *held)))
            return
        state = self._rooms.require_joined(f.room, c.fp)
        if len(f.body) > w.MAX_OP_BODY:
            raise refuse("too_large", "an op body is limited to 1 MiB")
        cfg = self.config
        too_many = len(state.log) >= cfg.max_backlog
        if too_many or state.log_bytes + len(f.body) > cfg.max_backlog_bytes:
            raise refuse("backlog_full", "a member of the room is too far behind; retry later")
        if not self._op_buckets.take(c.fp, now):
            raise refuse("rate_limited", "you are sending too fast; slow down and retry")
        op = self._rooms.append(state, c.fp, f.op_id, f.body, now)
        self._ops_in += 1
        out.append(OpAppended(f.room, op))
        out.append(Send(c.id, w.Posted(f.req, f.room, op.seq, op.ts)))
        push = w.Op(f.room, op.seq, c.fp, f.op_id, f.body, op.ts)
        # Once per op per recipient (nineteen in a room of twenty), so in one comprehension:
        # every other live connection of every joined member, in roster order.
        conns, by_identity, me = self._conns, self._by_identity, c.id
        sends = [
            Send(cid, push)
            for fp, member in state.members.items() if member.state == "joined"
            for cid in by_identity.get(fp, ())
            if cid != me and conns[cid].live and f.room not in conns[cid].replay
        ]
        out.extend(sends)
        self._ops_out += len(sends)

    def _ack(self, c: Conn, f: w.Ack, now: float, out: list[Effect]) -> None:
        out.extend(self._rooms.acknowledge(c.fp, c.device, f.room, f.seq))
        if c.replay:
            self._ops_out += replay_more(c, self._rooms, self.config.replay_window, out)

    def _resume(self, c: Conn, f: w.Resume, now: float, out: list[Effect]) -> None:
        if any(seq < 0 for seq in f.cursors.values()):
            raise refuse("bad_frame", "cursors must not be negative")
        rooms: list[w.ResumedRoom] = []
        missing: list[str] = []
        c.replay.clear()
        for room, named in f.cursors.items():
            state = self._rooms.rooms.get(room)
            member = state.members.get(c.fp) if state else None
            if state is None or member is None or member.state != "joined":
                missing.append(room)
                continue
            # Never from before the device's cursor here: a device that left and came back may
            # still name its old cursor, and what was posted while it was out is not its to read.
            cursor = max(named, self._rooms.cursors.get((c.fp, c.device, room), 0))
            if state.head > cursor:
                c.replay[room] = cursor
            rooms.append(w.ResumedRoom(room, state.first(), state.head))
            out.extend(self._rooms.acknowledge(c.fp, c.device, room, cursor))
        # A room the device did not name but is joined in (an accept or create whose answer was
        # lost): replay it from the device's cursor here, or a later live push would move the
        # device's cursor past what it never got.
        for room in sorted(self._rooms.member_of.get(c.fp, set()) - f.cursors.keys()):
            state = self._rooms.rooms[room]
            if state.members[c.fp].state != "joined":
                continue
            cursor = self._rooms.cursors.get((c.fp, c.device, room), state.head)
            if state.head > cursor:
                c.replay[room] = cursor
            rooms.append(w.ResumedRoom(room, state.first(), state.head))
        # The first window of the replay goes before `resumed`; acknowledgements bring the rest.
        self._ops_out += replay_more(c, self._rooms, self.config.replay_window, out)
        c.live = True
        out.append(Send(c.id, w.Resumed(f.req, rooms, missing)))
