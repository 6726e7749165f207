"""``read``, ``ack`` and ``read_slice``: what is waiting for us, handed out at least once.

Theory of operation
-------------------
``read`` changes nothing. It returns the held messages (unread ones; with ``all`` the read ones
too) and a ``lease`` naming the unread ones it handed out. A message becomes ``read`` only when
the reader acknowledges it with ``ack {"lease"}`` (or ``ack {"ids"}``), after it has put the
message in front of its agent or person: the CLI after printing, the MCP server once the tool
result is built. The ack marks the messages read, withdraws the gate's notices about them and
records the ``read`` receipts owed to their senders, all in one transaction; the receipts actor
(crosstalk/actors/receipts.py) posts them after that commit, so an ack cancelled after its commit
or a daemon killed there still sends them. ``delivered`` receipts are owed the same way, from the
room's apply transaction that holds the message (crosstalk/store/receipts.py).

So a reader that goes away before acknowledging (a client that hangs up, a timeout, a daemon
killed between the reply and the ack) loses nothing: the next ``read`` hands the same messages
out again under the same ids, and a reader that already showed one drops it by id. Leases live
in memory only and a bounded number of them: a daemon restart forgets them, and an ack by a
forgotten lease is ``unknown_message`` (read again, or acknowledge by ids).

Ids: every message has a 32-hex-digit id; anything that takes one (``ack``, ``read_slice``,
``answer``) also takes a unique prefix of at least :data:`MIN_PREFIX` digits, and human output
shows the first :data:`SHORT_ID` digits.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import sqlite3
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol

from crosstalk.actors.children import ChildSpec, Mailbox
from crosstalk.actors.fanout import coalescing
from crosstalk.actors.receipts import ReceiptsActor, wake
from crosstalk.core.room import Applied
from crosstalk.errors import Refused, UnknownMessage, UsageError
from crosstalk.features.caps import Identified, SendsOps, Stored, has_identity
from crosstalk.features.feature import Plugs, op
from crosstalk.store import messages
from crosstalk.store.gate import REFUSED_KEY
from crosstalk.store.receipts import owe
from crosstalk.store.sessions import get_session
from crosstalk.wire.control.params import AckParams, ReadParams, SliceParams
from crosstalk.wire.control.replies.messages import (
    AckReply,
    MessageView,
    ReadReply,
    SliceReply,
    SliceView,
)
from crosstalk.wire.control.table import ACK, READ, READ_SLICE
from crosstalk.wire.room_ops import MessageOp

log = logging.getLogger(__name__)

class Host(Stored, Identified, SendsOps, Protocol):
    """What reading uses: the store, who we are, and the receipts actor (declared here, posting
    into rooms)."""


SHORT_ID = 8
MIN_PREFIX = 6
MAX_LEASES = 256
ME = "me"  # how a message from another of our own sessions (``me/SESSION``) names its sender


# "from" is a keyword in Python: the field is ``from_`` and travels as "from".


class Leases:
    """Which unread message ids each recent ``read`` handed out (bounded, oldest forgotten)."""

    def __init__(self, limit: int = MAX_LEASES) -> None:
        self._limit = limit
        self._leases: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def grant(self, ids: tuple[str, ...]) -> str | None:
        """A new lease over ``ids``; None when there is nothing to acknowledge."""
        if not ids:
            return None
        lease = secrets.token_hex(8)
        self._leases[lease] = ids
        while len(self._leases) > self._limit:
            self._leases.popitem(last=False)
        return lease

    def take(self, lease: str) -> tuple[str, ...]:
        """The ids a lease covers (the lease is spent); UnknownMessage when it is not known."""
        ids = self._leases.pop(lease, None)
        if ids is None:
            raise UnknownMessage(
                f"There is no read lease {lease!r} here (the daemon may have restarted); "
                "read again and acknowledge that read."
            )
        return ids


def find_held(conn: sqlite3.Connection, ref: str) -> str:
    """The id of the held message ``ref`` names: its id, or a unique prefix of it."""
    ref = ref.strip().lower()
    if len(ref) < MIN_PREFIX or not all(c in "0123456789abcdef" for c in ref):
        raise UnknownMessage(f"{ref!r} is not a message id (ids are hexadecimal, 8 digits shown).")
    ids = messages.held_ids_from(conn, ref, limit=2)
    if len(ids) != 1:
        several = "several messages" if ids else "no message"
        raise UnknownMessage(f"{ref!r} names {several} here; `crosstalk read --all` shows ids.")
    return ids[0]


def _targets(conn: sqlite3.Connection, session: str | None) -> list[str] | None:
    """The names a message may be addressed to for ``session`` to read it (None: any)."""
    if session is None:
        return None
    known = get_session(conn, session)
    return [session] + ([Path(known.project).name] if known and known.project else [])


def held_views(
    conn: sqlite3.Connection, *, include_read: bool, session: str | None, me: str
) -> tuple[list[MessageView], tuple[str, ...]]:
    """Held messages for a reader, oldest first, and the ids among them still unread."""
    rows = messages.held_rows(conn, include_read=include_read, targets=_targets(conn, session))
    return [view_of(r, me) for r in rows], tuple(r.message_id for r in rows if r.read_at is None)


def view_of(row: messages.HeldRow, me: str) -> MessageView:
    """A held message as ``read`` shows it (``watch`` shows the same fields), for ``me``."""
    return _view(
        row.message_id, row.sender, row.body, row.received_at, room=row.room_name,
        label=ME if row.sender == me else row.sender_label,
    )


def _view(
    msg_id: str, sender: str, body: str, received: float, *, room: str | None, label: str | None
) -> MessageView:
    op: dict[str, Any] = json.loads(body)
    return MessageView(
        id=msg_id,
        from_=label or sender,  # our name for the verified signer, never the sender's own
        session=op.get("from_session"),
        room=room or "",
        intent=op.get("intent", "fyi"),
        kind=op.get("kind", "message"),
        text=op.get("text", ""),
        thread=op.get("thread"),
        reply_to=op.get("reply_to"),
        correlation=op.get("correlation"),
        ts=float(op.get("relay_ts", received)),
        slices=[
            SliceView(
                i,
                str(sl["kind"]),
                str(sl["label"]),
                len(str(sl["content"]).encode()),
                bool(sl.get("truncated", False)),
            )
            for i, sl in enumerate(op.get("slices", []))
        ],
        short=msg_id[:SHORT_ID],
    )


def take_slice(conn: sqlite3.Connection, ref: str, index: int) -> SliceReply:
    msg_id = find_held(conn, ref)
    body = json.loads(messages.held_body(conn, msg_id) or "{}")
    if body.get(REFUSED_KEY):
        raise Refused(f"You refused message {msg_id[:SHORT_ID]}; its slices were not kept.")
    slices = body.get("slices", [])
    if not 0 <= index < len(slices):
        raise UsageError(f"Message {msg_id[:SHORT_ID]} has {len(slices)} slice(s); no {index}.")
    sl = slices[index]
    content = str(sl["content"])
    return SliceReply(
        str(sl["kind"]),
        str(sl["label"]),
        len(content.encode()),
        str(sl["sha256"]),
        content,
        bool(sl.get("truncated", False)),
    )


class ReceiptsInbox:
    """The receipts actor's mailbox: one pending wake is enough, since the actor drains
    everything owed when it wakes (and when it starts)."""

    def __init__(self) -> None:
        self.mailbox = Mailbox[None](1)

    async def ring(self) -> None:
        wake(self.mailbox.send)


def _me(daemon: Host) -> str:
    return daemon.keys.fingerprint if daemon.identity is not None else ""


def owe_delivered(daemon: Host, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a message someone else sent us is held, so a ``delivered`` receipt is owed
    (in the same transaction; the receipts actor posts it after the commit)."""
    if isinstance(applied.op, MessageOp) and applied.sender != _me(daemon):
        owe(conn, "delivered", applied.room_id, [applied.op_id], time.time())


def receipts_child(daemon: Host, receipts: ReceiptsInbox) -> ChildSpec[None]:
    """The receipts actor, which posts what is owed into the rooms."""
    make = functools.partial(
        ReceiptsActor, store=daemon.store, send_op=daemon.send_op,
        ready=functools.partial(has_identity, daemon),
    )
    return ChildSpec("receipts", make, receipts.mailbox)


async def read(daemon: Host, leases: Leases, params: ReadParams) -> ReadReply:
    """The held messages, changing nothing, with a lease over the unread ones."""
    me = _me(daemon)
    views, unread = await daemon.store.read(
        lambda c: held_views(c, include_read=params.all, session=params.session, me=me)
    )
    return ReadReply(views, leases.grant(unread))


def _mark_read(conn: sqlite3.Connection, ids: list[str], refs: list[str]) -> dict[str, list[str]]:
    """Mark ``ids`` and the messages ``refs`` name read; the ids that became read, by room."""
    named = [find_held(conn, ref) for ref in refs]
    now = time.time()
    by_room = messages.mark_read(conn, ids + named, now)
    for room_id, read_ids in by_room.items():  # owed in the same transaction: never lost
        owe(conn, "read", room_id, read_ids, now)
    return by_room


async def ack(
    daemon: Host, leases: Leases, receipts: ReceiptsInbox, params: AckParams
) -> AckReply:
    """Mark what a read handed out (or the messages named) read, and owe their receipts."""
    if params.lease is None and not params.ids:
        raise UsageError('Acknowledge a read by its "lease", or messages by their "ids".')
    wanted = list(leases.take(params.lease)) if params.lease is not None else []
    read_now = await daemon.store.write(lambda c: _mark_read(c, wanted, params.ids))
    await receipts.ring()
    return AckReply(sum(len(ids) for ids in read_now.values()))


async def read_slice(daemon: Host, params: SliceParams) -> SliceReply:
    """One slice of a held message, in full."""
    return await daemon.store.read(lambda c: take_slice(c, params.id, params.index))


def plug(daemon: Host) -> Plugs:
    """Owe ``delivered`` receipts as messages apply, declare the receipts actor; ``read``, ``ack``,
    ``read_slice``."""
    leases, receipts = Leases(), ReceiptsInbox()
    return Plugs(
        ops=(
            op(READ, functools.partial(read, daemon, leases)),
            op(ACK, functools.partial(ack, daemon, leases, receipts)),
            op(READ_SLICE, functools.partial(read_slice, daemon)),
        ),
        appliers=(functools.partial(owe_delivered, daemon),),
        # The actor re-reads the owed receipts when told a batch was applied: COALESCE.
        applied_subscribers=(coalescing("receipts", receipts.ring),),
        children=(receipts_child(daemon, receipts),),
    )
