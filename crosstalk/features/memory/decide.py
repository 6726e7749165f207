"""``decide``: a decision appended to the repository's DECISIONS.md and announced in the room."""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import sqlite3
import time
from pathlib import Path

import trio

from crosstalk.core.triage import Kind
from crosstalk.errors import CrosstalkError, NotInRepository, UnknownPeer, UsageError
from crosstalk.features.feature import ControlOp, op
from crosstalk.features.memory.handle import MemoryFeature
from crosstalk.project import append_decision_file, repo_root
from crosstalk.store.rooms import Room, contact_named, direct_room_with, members
from crosstalk.wire.control.params import DecideParams, Where
from crosstalk.wire.control.replies.memory import DecideReply
from crosstalk.wire.control.table_memory import DECIDE
from crosstalk.wire.memory import DecisionMade
from crosstalk.wire.room_ops import MessageOp

log = logging.getLogger(__name__)


def decide_op(feature: MemoryFeature) -> ControlOp:
    """The ``decide`` op."""

    async def handler(params: DecideParams) -> DecideReply:
        return await decide(feature, params)

    return op(DECIDE, handler)


async def decide(feature: MemoryFeature, params: DecideParams) -> DecideReply:
    """Append to DECISIONS.md first (the record that matters), then announce it in the room.

    A decision is recorded even when it cannot be announced (no room to choose, relay refusing):
    that is logged, and the reply's ``room`` is None. A ``--room`` that names no room of ours is
    ``unknown_room`` before DECISIONS.md is touched: the person asked for that room, and a
    typo must not be recorded silently unannounced.
    """
    if not params.text.strip():
        raise UsageError("There is no decision to record: the text is empty.")
    named = None
    if params.room is not None:  # a room asked for by name must exist before anything is written
        named = await feature.room_for(Where(params.room, params.cwd))
    repo = _repo_dir(params.repo, params.cwd)
    who = feature.identity_label()
    when = dt.datetime.now(dt.UTC).isoformat()
    path = await trio.to_thread.run_sync(
        lambda: append_decision_file(repo, text=params.text, why=params.why, who=who,
                                     when_utc=when)
    )
    decision_id, room = "d" + secrets.token_hex(5), None
    try:
        chosen = named or await feature.room_for(Where(params.room, params.cwd))
        await feature.write(chosen, DecisionMade(decision_id, params.text, params.why, repo.name))
        room = chosen
    except CrosstalkError as exc:
        log.info("decision recorded in %s, not announced: %s", path, exc.message)
    if params.tell:
        await _tell(feature, params.tell, params.text, announced_in=room)
    return DecideReply(str(path), decision_id, room.name if room else None)


async def _tell(feature: MemoryFeature, who: str, text: str, *, announced_in: Room | None) -> None:
    """Send ``who`` the decision in your direct room, unless the room it was announced in
    already tells them (a member is told once, by the announcement)."""

    def direct(conn: sqlite3.Connection) -> str | None:
        contact = contact_named(conn, who)
        if announced_in is not None and any(
            m.fingerprint == contact.fingerprint for m in members(conn, announced_in.room_id)
        ):
            return None
        room = direct_room_with(conn, contact.fingerprint)
        if room is None:
            raise UnknownPeer(f"You share no room with {contact.label} yet.")
        return room.room_id

    room_id = await feature.daemon.store.read(direct)
    if room_id is None:
        return
    message = MessageOp(
        msg_id=secrets.token_hex(16), text=f"Decided: {text}", kind=Kind.DECISION,
        from_label=feature.identity_label(), sent_at=time.time(),
    )
    await feature.daemon.send_op(room_id, message, op_id=message.msg_id)


def _repo_dir(repo: str | None, cwd: str | None) -> Path:
    """``--repo``, else the git repository around ``cwd``: never a bare directory, where a
    DECISIONS.md would be a stray file nobody finds (issue 39)."""
    if repo:
        chosen = Path(repo)
    else:
        where = cwd or os.getcwd()
        found = repo_root(where)
        if found is None:
            raise NotInRepository(
                f"{where} is not inside a git repository; run `crosstalk decide` in one, "
                "or pass the repository with --repo."
            )
        chosen = found
    try:
        is_dir = chosen.is_dir()
    except OSError:  # a path too long for the OS to look at is no directory either
        is_dir = False
    if not is_dir:
        shown = str(chosen) if len(str(chosen)) <= 200 else f"{str(chosen)[:200]}…"
        raise UsageError(f"{shown} is not a directory; pass the repository with --repo.")
    return chosen.absolute()
