"""The leader's table of other nodes' connections, and the messages between nodes (sans-IO).

Theory of operation
-------------------
On the leading node (see :mod:`relay.cluster`) the core sees connections from every node. Its
own connections keep their shell ids; a connection of node ``n`` with local id ``c`` gets a
cluster-wide id from ``REMOTE_BASE`` up, which never collides with a local id. :class:`Routes`
maps both ways, remembers when each node was last heard from (``now`` is any monotonic clock the
caller owns), forgets a silent node's connections in one step, and splits a batch of core
effects into the leader's own and one list per other node.

Wire format between nodes (JSON, one NATS message each): a follower's event is
``{"e": epoch, "n": node, "k": kind, ...}`` with kind ``o`` (opened; ``c`` conn, ``s`` source),
``f`` (frame; ``c`` and ``t`` text or ``b`` base64 bytes), ``x`` (closed; ``c``) or ``b`` (beat).
The leader's delivery is ``{"e": epoch, "i": [[conn, text-or-null], ...]}``, null meaning
close. :func:`parse_event` and :func:`parse_delivery` turn a message into a value or ``None``
(malformed: dropped by the caller, never fatal).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs

from crosstalk.wire.relay import encode_frame
from relay.effects import Close, Effect, Send

REMOTE_BASE = 1 << 40

Delivery = list[list[Any]]  # [[conn, text or None], ...]


@attrs.frozen
class Event:
    epoch: int
    node: str
    kind: str  # "o", "f", "x", "b"
    conn: int = 0
    source: str = ""
    data: str | bytes = ""


def parse_event(raw: bytes) -> Event | None:
    try:
        m = json.loads(raw)
        kind, node, epoch = m["k"], m["n"], m["e"]
        if kind not in ("o", "f", "x", "b") or not isinstance(node, str):
            return None
        if not isinstance(epoch, int):
            return None
        data: str | bytes = m.get("t", "")
        if "b" in m:
            data = base64.b64decode(m["b"], validate=True)
        if not isinstance(data, str | bytes):
            return None
        return Event(epoch, node, kind, int(m.get("c", 0)), str(m.get("s", "")), data)
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


def event_body(kind: str, conn: int, *, source: str = "", data: str | bytes | None = None
               ) -> dict[str, Any]:
    body: dict[str, Any] = {"k": kind, "c": conn}
    if kind == "o":
        body["s"] = source
    if isinstance(data, bytes):
        body["b"] = base64.b64encode(data).decode()
    elif data is not None:
        body["t"] = data
    return body


def parse_delivery(raw: bytes) -> tuple[int, list[tuple[int, str | None]]] | None:
    try:
        m = json.loads(raw)
        items = [(int(conn), text) for conn, text in m["i"]]
        if not isinstance(m["e"], int) or any(
            t is not None and not isinstance(t, str) for _, t in items
        ):
            return None
        return m["e"], items
    except (ValueError, KeyError, TypeError):
        return None


class Routes:
    """Cluster-wide ids for other nodes' connections (the leader's side)."""

    def __init__(self) -> None:
        self._remote: dict[int, tuple[str, int]] = {}
        self._origin: dict[tuple[str, int], int] = {}
        self._seen: dict[str, float] = {}
        self._next = REMOTE_BASE

    def __len__(self) -> int:
        return len(self._remote)

    def heard(self, node: str, now: float) -> None:
        self._seen[node] = now

    def open(self, node: str, conn: int) -> int:
        self._next += 1
        self._remote[self._next], self._origin[(node, conn)] = (node, conn), self._next
        return self._next

    def find(self, node: str, conn: int) -> int | None:
        return self._origin.get((node, conn))

    def close(self, node: str, conn: int) -> int | None:
        gid = self._origin.pop((node, conn), None)
        if gid is not None:
            del self._remote[gid]
        return gid

    def silent(self, now: float, timeout: float) -> dict[str, list[int]]:
        """Forget every node not heard from within ``timeout``; their cluster-wide ids."""
        gone = {n for n, seen in self._seen.items() if seen < now - timeout}
        out: dict[str, list[int]] = {n: [] for n in gone}
        for gid, (node, _) in list(self._remote.items()):
            if node in gone:
                out[node].append(gid)
                del self._origin[self._remote.pop(gid)]
        for node in gone:
            del self._seen[node]
        return out

    def forget_all(self) -> dict[str, list[tuple[int, int]]]:
        """Forget every remote connection: ``{node: [(gid, conn), ...]}``."""
        out: dict[str, list[tuple[int, int]]] = {}
        for gid, (node, conn) in self._remote.items():
            out.setdefault(node, []).append((gid, conn))
        self._remote.clear()
        self._origin.clear()
        return out

    def split(self, batch: list[Effect]) -> tuple[list[Effect], dict[str, Delivery]]:
        """The effects for this node, and what to deliver to each other node (frames encoded)."""
        if not self._remote:
            return batch, {}
        local: list[Effect] = []
        per_node: dict[str, Delivery] = {}
        encoded: dict[int, str] = {}
        for effect in batch:
            target = self._remote.get(effect.conn) if isinstance(effect, Send | Close) else None
            if target is None:
                local.append(effect)
                continue
            item: str | None = None
            if isinstance(effect, Send):
                item = encoded.get(id(effect.frame))
                if item is None:
                    item = encoded[id(effect.frame)] = encode_frame(effect.frame)
            per_node.setdefault(target[0], []).append([target[1], item])
        return local, per_node
