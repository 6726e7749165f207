"""A small world for the gate actor's tests: a real, migrated SQLite database in memory behind a
fake of ``Store`` that runs each transaction inline (no worker thread, so the autojump clock sees
every wait), a fake ``send_op`` that records what the gate sent, and a few contacts and rooms.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

import attrs
import trio

from crosstalk.core.room import Applied
from crosstalk.core.triage import Intent, Kind
from crosstalk.store.migrations import migrate
from crosstalk.store.rooms import Contact, Room, RoomMember, add_member, add_room, upsert_contact
from crosstalk.wire.room_ops import MessageOp, RoomOp

R = TypeVar("R")

ME = "me00-0000-0000-0000"
BEN = "ben0-0000-0000-0000"  # a person we paired with: a room of two
BOT = "bot0-0000-0000-0000"  # paired, but joined with --agent
CY = "cy00-0000-0000-0000"  # in a shared room with us, no room of two
ROOM_BEN, ROOM_BOT, ROOM_LOUD = "room-ben", "room-bot", "room-loud"


class InlineStore:
    """The ``Store`` interface over one in-memory connection; reports each commit's time."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        migrate(self.conn)
        self.commits_send, self.commits = trio.open_memory_channel[float](1000)

    async def write(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        await trio.lowlevel.checkpoint()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.commits_send.send_nowait(trio.current_time())
        return result

    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        await trio.lowlevel.checkpoint()
        self.conn.execute("BEGIN")
        try:
            return fn(self.conn)
        finally:
            self.conn.execute("ROLLBACK")

    def now(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``fn`` at once, outside the actor (test setup and assertions)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(self.conn)
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return result


@attrs.frozen
class Sent:
    room_id: str
    op: RoomOp
    op_id: str | None


class FakeSendOp:
    """Records every op the gate sends, in order."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    async def __call__(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str:
        await trio.lowlevel.checkpoint()
        self.sent.append(Sent(room_id, op, op_id))
        return op_id or f"op-{len(self.sent)}"


def _contact(fp: str, label: str, *, agent: bool = False) -> Contact:
    return Contact(fp, label, "laptop", b"s" * 32, b"b" * 32, is_agent=agent, added_at=1.0)


def _member(room: str, fp: str, label: str) -> RoomMember:
    return RoomMember(room, fp, label, b"s" * 32, b"b" * 32)


def populate(conn: sqlite3.Connection) -> None:
    """ben and bot are paired (rooms of two); cy and ben share the loud room with us."""
    upsert_contact(conn, _contact(BEN, "ben"))
    upsert_contact(conn, _contact(BOT, "bot", agent=True))
    for room, kind, name in (
        (ROOM_BEN, "direct", "ben"),
        (ROOM_BOT, "direct", "bot"),
        (ROOM_LOUD, "shared", "incident"),
    ):
        add_room(conn, Room(room, name, kind, "joined", 0, 1.0), b"k" * 32)
    add_member(conn, _member(ROOM_BEN, BEN, "ben"))
    add_member(conn, _member(ROOM_BOT, BOT, "bot"))
    for fp, label in ((BEN, "ben"), (CY, "cy")):
        add_member(conn, _member(ROOM_LOUD, fp, label))


def message(
    op_id: str,
    sender: str,
    room: str,
    *,
    intent: Intent = Intent.FYI,
    kind: Kind = Kind.MESSAGE,
    **fields: str | None,
) -> Applied:
    """One applied room message, as the room actor hands it over."""
    op = MessageOp(msg_id=op_id, text="words", intent=intent, kind=kind, **fields)  # type: ignore[arg-type]
    return Applied(room, 1, op_id, sender, 0.0, op)
