"""How the relay's writes look as messages in one JetStream stream, and back (sans-IO).

Theory of operation
-------------------
Everything durable lives in stream ``N_rooms`` (namespace ``N``) under ``N.s.>``, one subject per
thing that needs an order of its own:

* ``N.s.r.<room>.m``: the room's membership events (``room``, ``member``, ``drop``,
  ``owed``: a departed member's unacknowledged op ids, and ``stmt``: a statement of the room's
  membership history) as JSON;
  ``gone`` (the room was deleted) is a rollup that leaves only itself.
* ``N.s.r.<room>.o``: the room's ops. A lone op is one message: the body is the payload,
  seq/sender/op id/time are headers. Consecutive ops of one sender that a node decided in one
  pass (a client's posts queued behind one another) are one message under one compare-and-set:
  the same headers as comma-separated lists, plus ``Ct-Len`` (each body's length), and the
  bodies joined. ``Nats-Msg-Id`` (the first op's) makes a retried publish land once.
* ``N.s.c.<room>.<fp>.<device>``: a device's cursor in a room (a rollup: only the newest stays).
* ``N.s.d.<fp>.<device>``: a known device (a rollup).
* ``N.s.f.<room>``: the room's prune floor (a rollup): ops up to it are gone even where the
  newest op is kept in the stream to carry the room's head.
* ``N.s.slot.<number>``: a pairing slot: ``open`` (a rollup: it replaces a previous slot under
  the number), ``join``, ``part``, and ``closed`` (a rollup tombstone). ``N.s.grant.<a>.<b>``:
  a pairing grant, ``grant`` or ``spent`` (both rollups). Both carry ``Nats-TTL``, so what no
  node removed goes by itself.
* ``N.s.key``: the relay's public key, written once by the first node.

A *unit* is what is written by compare-and-set: a room (``r.<room>``, checked against the last
sequence of ``N.s.r.<room>.*``, so membership events and ops share one order), a slot
(``slot.<number>``) or a grant (``grant.<a>.<b>``). Cursors and devices are not units: a cursor
only moves forward, so the newest value wins and a stale one only holds ops longer.

:func:`plan` turns the writes of one request into :class:`Outgoing` messages, each with the
purges to run once it is stored. :func:`decode` turns a stored (or republished) message back into
the writes it carried, for a node that did not make them.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import attrs

from crosstalk.wire.chain import Statement
from crosstalk.wire.converter import structure_remote, unstructure
from crosstalk.wire.relay import Member, Side
from relay.limits import RelayConfig
from relay.storage import (
    CursorPut,
    DepartedOps,
    DevicePut,
    GrantDeleted,
    GrantPut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    Peer,
    RoomDeleted,
    RoomPut,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    StatementAppended,
    StoredOp,
    Write,
)

_DEFAULTS = RelayConfig()
# Nats-TTL of every slot and grant message: past the longest a slot or grant lives (a minute of
# slack for clock skew), so it never removes a live one and sweeps up what no node removed.
SLOT_KEEP = max(_DEFAULTS.slot_ttl, _DEFAULTS.grant_ttl) + 60.0
# The most ops one message carries, and the most body bytes a group gathers (a lone op may be
# larger): the headers of 64 ops with the longest op ids stay far below NATS's limits.
MAX_GROUP_OPS = 64
MAX_GROUP_BYTES = 1 << 20

# The writes of a room's membership message (``N.s.r.<room>.m``), one event each.
Membership = RoomPut | MemberPut | MemberDeleted | DepartedOps | StatementAppended


@attrs.frozen
class Outgoing:
    """One message to publish. ``unit`` set: by compare-and-set against that unit's last seq."""

    subject: str
    payload: bytes
    headers: dict[str, str]
    unit: str | None = None
    ttl: float | None = None  # seconds (Nats-TTL), for slots and grants
    purges: tuple[str, ...] = ()  # subjects to purge once the message is stored
    pruned: tuple[str, int] | None = None  # (room, through): a prefix of the room's ops to purge
    writes: tuple[Write, ...] = ()  # what the message carries (what decoding it gives back)


@attrs.frozen
class Stored:
    """What a stored message says: its unit (if any) and the writes it carried."""

    unit: str | None
    writes: list[Write]
    by: str = ""  # who made a membership change (``Ct-By``)


class Layout:
    """Subject names for one namespace, and the codec between writes and messages."""

    def __init__(self, namespace: str) -> None:
        self.ns = namespace
        self.stream = f"{namespace}_rooms"
        self.root = f"{namespace}.s"
        self.republished = f"{namespace}.p"

    # --- subjects -------------------------------------------------------------------------------

    def unit_subject(self, unit: str) -> str:
        """The subject (maybe a wildcard) whose last sequence a unit's CAS checks."""
        if unit.startswith("r."):
            return f"{self.root}.{unit}.*"
        return f"{self.root}.{unit}"

    def room_ops(self, room: str) -> str:
        return f"{self.root}.r.{room}.o"

    def key_subject(self) -> str:
        return f"{self.root}.key"

    # --- writes -> messages -------------------------------------------------------------------

    def plan(self, writes: list[Write], by: str = "") -> list[Outgoing]:
        """The messages for ``writes`` in order; consecutive membership writes of a room share
        one message (so a request's roster change is one event), and so do consecutive ops of
        one sender in a room (up to :data:`MAX_GROUP_OPS`).

        A cursor, device or prune floor among a room's membership writes (an accept's new
        cursor sits between the member and its statement) goes out after them: split there,
        another node would take in, and push, the member's row without the statement that
        makes it (its members' histories then disagree with the rows, an alarm), and a node
        dying between the two would store the row alone."""
        out: list[Outgoing] = []
        group: list[Membership] = []
        held: list[Write] = []  # newest-wins writes met inside ``group``: stored after it
        ops: list[OpAppended] = []
        size = 0

        def flush() -> None:
            if group:
                out.append(self._membership(group, by))
                group.clear()
            for w in held:
                out.append(attrs.evolve(self._one(w, by), writes=(w,)))
            held.clear()
            if ops:
                out.append(self._op(ops[0]) if len(ops) == 1 else self._ops(ops))
                ops.clear()

        for w in writes:
            if type(w) is OpAppended:
                if ops and (ops[0].room != w.room or ops[0].op.sender != w.op.sender
                            or len(ops) >= MAX_GROUP_OPS
                            or size + len(w.op.body) > MAX_GROUP_BYTES):
                    flush()
                if group:
                    flush()
                if not ops:
                    size = 0
                ops.append(w)
                size += len(w.op.body)
                continue
            if isinstance(w, RoomPut | MemberPut | MemberDeleted | DepartedOps
                          | StatementAppended):
                if ops or (group and group[0].room != w.room):
                    flush()
                group.append(w)
                continue
            if group and isinstance(w, CursorPut | DevicePut | OpsPruned):
                held.append(w)
                continue
            flush()
            out.append(attrs.evolve(self._one(w, by), writes=(w,)))
        flush()
        return out

    def units_of(self, writes: list[Write]) -> list[str]:
        """The units ``writes`` change, in order (those of :meth:`plan`'s messages, without
        building them: a node asks before every write)."""
        units: list[str] = []
        for w in writes:
            unit = unit_of_write(w)
            if unit is not None and unit not in units:
                units.append(unit)
        return units

    def _membership(self, group: list[Membership], by: str) -> Outgoing:
        room = group[0].room
        events = [_event(w) for w in group]
        drops = tuple(f"{self.root}.c.{room}.{e['fp']}.*" for e in events if e["w"] == "drop")
        return Outgoing(f"{self.root}.r.{room}.m", _json(events), {"Ct-By": by},
                        unit=f"r.{room}", purges=drops, writes=tuple(group))

    def _op(self, w: OpAppended) -> Outgoing:
        op = w.op
        op_id = base64.urlsafe_b64encode(op.op_id.encode()).decode()
        headers = {"Ct-Seq": str(op.seq), "Ct-Sender": op.sender, "Ct-Ts": repr(op.ts),
                   "Ct-Op": op_id, "Nats-Msg-Id": f"{w.room}:{op.sender}:{op_id}"}
        return Outgoing(self.room_ops(w.room), op.body, headers, unit=f"r.{w.room}",
                        writes=(w,))

    def _ops(self, run: list[OpAppended]) -> Outgoing:
        """Several ops of one sender in one room as one message (see the module's notes)."""
        ops = [w.op for w in run]
        ids = [base64.urlsafe_b64encode(op.op_id.encode()).decode() for op in ops]
        room, sender = run[0].room, ops[0].sender
        headers = {"Ct-Seq": ",".join([str(op.seq) for op in ops]), "Ct-Sender": sender,
                   "Ct-Ts": ",".join([repr(op.ts) for op in ops]), "Ct-Op": ",".join(ids),
                   "Ct-Len": ",".join([str(len(op.body)) for op in ops]),
                   "Nats-Msg-Id": f"{room}:{sender}:{ids[0]}"}
        return Outgoing(self.room_ops(room), b"".join([op.body for op in ops]), headers,
                        unit=f"r.{room}", writes=tuple(run))

    def _one(self, w: Write, by: str) -> Outgoing:
        r = self.root
        if isinstance(w, OpAppended):
            return self._op(w)
        if isinstance(w, RoomDeleted):
            return Outgoing(f"{r}.r.{w.room}.m", _json([{"w": "gone"}]),
                            {"Ct-By": by, "Nats-Rollup": "sub"}, unit=f"r.{w.room}",
                            purges=(self.room_ops(w.room), f"{r}.c.{w.room}.>", f"{r}.f.{w.room}"))
        if isinstance(w, OpsPruned):
            return Outgoing(f"{r}.f.{w.room}", str(w.through).encode(), {"Nats-Rollup": "sub"},
                            pruned=(w.room, w.through))
        if isinstance(w, CursorPut):
            return Outgoing(f"{r}.c.{w.room}.{w.fingerprint}.{w.device}", str(w.seq).encode(),
                            {"Nats-Rollup": "sub"})
        if isinstance(w, DevicePut):
            return Outgoing(f"{r}.d.{w.fingerprint}.{w.device}", b"", {"Nats-Rollup": "sub"})
        return self._slot(w)

    def _slot(self, w: Write) -> Outgoing:
        r = self.root
        if isinstance(w, GrantPut | GrantDeleted):
            unit = f"grant.{w.a}.{w.b}"
            grant: dict[str, Any] = ({"w": "grant", "exp": w.expires_at}
                                     if isinstance(w, GrantPut) else {"w": "spent"})
            return Outgoing(f"{r}.{unit}", _json(grant), {"Nats-Rollup": "sub"}, unit=unit,
                            ttl=SLOT_KEEP)
        assert isinstance(w, SlotOpened | SlotFilled | SlotPartPut | SlotRemoved)
        unit = f"slot.{w.number}"
        headers: dict[str, str] = {}
        if isinstance(w, SlotOpened):
            body: dict[str, Any] = {"w": "open", "owner": _peer(w.owner), "exp": w.expires_at}
            headers["Nats-Rollup"] = "sub"
        elif isinstance(w, SlotFilled):
            body = {"w": "join", "joiner": _peer(w.joiner)}
        elif isinstance(w, SlotPartPut):
            body = {"w": "part", "side": w.side, "i": w.index,
                    "data": base64.b64encode(w.data).decode()}
        else:
            body = {"w": "closed"}
            headers["Nats-Rollup"] = "sub"
        return Outgoing(f"{r}.{unit}", _json(body), headers, unit=unit, ttl=SLOT_KEEP)

    def unit_of_subject(self, subject: str) -> str | None:
        """The unit a stored message's subject belongs to, without decoding the message (None:
        no unit, or not this layout's)."""
        prefix = f"{self.root}."
        if not subject.startswith(prefix):
            return None
        kind, _, rest = subject[len(prefix):].partition(".")
        if kind == "r":
            room, _, part = rest.rpartition(".")
            return f"r.{room}" if room and part in ("m", "o") else None
        if kind in ("slot", "grant") and rest:
            return f"{kind}.{rest}"
        return None

    # --- messages -> writes -------------------------------------------------------------------

    def decode(self, subject: str, headers: dict[str, str], data: bytes) -> Stored | None:
        """The writes a stored message carried; None for a subject this layout does not use.

        Raises ValueError, KeyError or TypeError on a malformed message.
        """
        prefix = f"{self.root}."
        if not subject.startswith(prefix):
            return None
        kind, *key = subject[len(prefix):].split(".")
        if kind == "r" and len(key) == 2:
            return self._room(key[0], key[1], headers, data)
        if kind == "c" and len(key) == 3:
            return Stored(None, [CursorPut(key[1], key[2], key[0], int(data))])
        if kind == "f" and len(key) == 1:
            return Stored(None, [OpsPruned(key[0], int(data))])
        if kind == "d" and len(key) == 2:
            return Stored(None, [DevicePut(key[0], key[1])])
        if kind == "slot" and len(key) == 1:
            return Stored(f"slot.{key[0]}", [_slot_write(key[0], json.loads(data))])
        if kind == "grant" and len(key) == 2:
            body = json.loads(data)
            write: Write = (GrantPut(key[0], key[1], float(body["exp"])) if body["w"] == "grant"
                            else GrantDeleted(key[0], key[1]))
            return Stored(f"grant.{key[0]}.{key[1]}", [write])
        return None

    def _room(self, room: str, part: str, headers: dict[str, str], data: bytes) -> Stored:
        unit = f"r.{room}"
        if part == "o" and "Ct-Len" in headers:
            return Stored(unit, _grouped_ops(room, headers, data))
        if part == "o":
            op_id = base64.urlsafe_b64decode(headers["Ct-Op"].encode()).decode()
            op = StoredOp(int(headers["Ct-Seq"]), headers["Ct-Sender"], op_id, data,
                          float(headers["Ct-Ts"]))
            return Stored(unit, [OpAppended(room, op)])
        writes: list[Write] = []
        for event in json.loads(data):
            kind = event["w"]
            if kind == "room":
                writes.append(RoomPut(room))
            elif kind == "member":
                writes.append(MemberPut(room, structure_remote(event["m"], Member)))
            elif kind == "drop":
                writes.append(MemberDeleted(room, str(event["fp"])))
            elif kind == "owed":
                owed = tuple((str(op_id), int(seq)) for op_id, seq in event["ops"])
                writes.append(DepartedOps(room, str(event["fp"]), owed))
            elif kind == "stmt":
                stmt = structure_remote(event["s"], Statement)
                writes.append(StatementAppended(room, int(event["i"]), stmt))
            elif kind == "gone":
                writes.append(RoomDeleted(room))
            else:
                raise ValueError(f"unknown room event {kind!r}")
        return Stored(unit, writes, headers.get("Ct-By", ""))


def unit_of_write(w: Write) -> str | None:
    """The unit a write's message is compare-and-set against (None: newest wins)."""
    if isinstance(w, RoomPut | MemberPut | MemberDeleted | DepartedOps | StatementAppended
                  | RoomDeleted | OpAppended):
        return f"r.{w.room}"
    if isinstance(w, GrantPut | GrantDeleted):
        return f"grant.{w.a}.{w.b}"
    if isinstance(w, SlotOpened | SlotFilled | SlotPartPut | SlotRemoved):
        return f"slot.{w.number}"
    return None


def _grouped_ops(room: str, headers: dict[str, str], data: bytes) -> list[Write]:
    """The ops of a message that carries several (see :meth:`Layout._ops`)."""
    seqs, ids = headers["Ct-Seq"].split(","), headers["Ct-Op"].split(",")
    stamps, lengths = headers["Ct-Ts"].split(","), headers["Ct-Len"].split(",")
    if not len(seqs) == len(ids) == len(stamps) == len(lengths):
        raise ValueError("the lists of a grouped op message differ in length")
    sender = headers["Ct-Sender"]
    writes: list[Write] = []
    at = 0
    for seq, op_id, ts, length in zip(seqs, ids, stamps, lengths, strict=True):
        end = at + int(length)
        if int(length) < 0 or end > len(data):
            raise ValueError("a grouped op message's bodies are shorter than it says")
        writes.append(OpAppended(room, StoredOp(
            int(seq), sender, base64.urlsafe_b64decode(op_id.encode()).decode(),
            data[at:end], float(ts))))
        at = end
    if at != len(data):
        raise ValueError("a grouped op message's bodies are longer than it says")
    return writes


def _event(w: Membership) -> dict[str, Any]:
    if isinstance(w, RoomPut):
        return {"w": "room"}
    if isinstance(w, MemberPut):
        return {"w": "member", "m": unstructure(w.member)}
    if isinstance(w, DepartedOps):
        return {"w": "owed", "fp": w.fingerprint, "ops": [list(pair) for pair in w.ops]}
    if isinstance(w, StatementAppended):
        return {"w": "stmt", "i": w.index, "s": unstructure(w.stmt)}
    return {"w": "drop", "fp": w.fingerprint}


def _slot_write(number: str, body: dict[str, Any]) -> Write:
    kind = body["w"]
    if kind == "open":
        return SlotOpened(number, _peer_from(body["owner"]), float(body["exp"]))
    if kind == "join":
        return SlotFilled(number, _peer_from(body["joiner"]))
    if kind == "part":
        side: Side = "owner" if body["side"] == "owner" else "joiner"
        return SlotPartPut(number, side, int(body["i"]), base64.b64decode(body["data"]))
    if kind == "closed":
        return SlotRemoved(number)
    raise ValueError(f"unknown slot event {kind!r}")


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _peer(peer: Peer) -> dict[str, str]:
    return {"fp": peer.fingerprint, "ed": base64.b64encode(peer.ed_pub).decode(),
            "x": base64.b64encode(peer.x_pub).decode()}


def _peer_from(fields: dict[str, Any]) -> Peer:
    return Peer(str(fields["fp"]), base64.b64decode(fields["ed"]), base64.b64decode(fields["x"]))
