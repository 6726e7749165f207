"""The gate's decisions made inside a room's transaction (``Triage.applier``): decided there,
and a refusal handed on only once that transaction committed, once."""

from __future__ import annotations

import sqlite3

import pytest

from crosstalk.actors.gate import Me, Triage
from crosstalk.core.levels import Level, TrustSettings
from crosstalk.core.room import Applied
from crosstalk.core.triage import Decision, Intent, Kind
from crosstalk.features.messages.ops import hold_message
from crosstalk.store import attention as db
from tests.actors.gate_world import BEN, ME, ROOM_BEN, InlineStore, message, populate


class _Rollback(Exception):
    pass


def _world(level: Level) -> tuple[InlineStore, Triage]:
    store = InlineStore()
    store.now(populate)
    store.now(lambda conn: db.save_trust(conn, TrustSettings().with_pin(BEN, level)))
    return store, Triage(me=lambda: Me(ME, "me"), clock=lambda: 1000.0)


def _apply(store: InlineStore, triage: Triage, applied: Applied) -> None:
    """The room's transaction: hold the message, then the gate's applier, then commit."""

    def apply(conn: sqlite3.Connection) -> None:
        hold_message(conn, applied, me=ME)
        triage.applier(conn, applied)

    store.now(apply)


def _ask(op_id: str = "a1") -> Applied:
    return message(op_id, BEN, ROOM_BEN, kind=Kind.ASK, intent=Intent.QUESTION)


def test_a_message_is_decided_in_the_transaction_that_holds_it() -> None:
    """The notice is written by the applier, in the room's transaction."""
    store, triage = _world(Level.ASK)
    _apply(store, triage, message("m1", BEN, ROOM_BEN, intent=Intent.BLOCKING))
    [notice] = store.now(db.list_notices)
    assert (notice.message_id, notice.decision) == ("m1", Decision.NOTICE_NOW)
    assert triage.take_refusals([message("m1", BEN, ROOM_BEN)]) == ()


def test_a_refusal_is_handed_on_once_after_its_commit() -> None:
    """A refused ask owes one answer; a re-delivery of the same op owes none more."""
    store, triage = _world(Level.NOTIFY)
    ask = _ask()
    _apply(store, triage, ask)
    _apply(store, triage, ask)  # re-delivered: already decided, nothing owed again
    [refused] = triage.take_refusals([ask])
    assert (refused.room_id, refused.op.reply_to, refused.op.refused) == (ROOM_BEN, "a1", True)
    assert triage.take_refusals([ask]) == ()
    assert [n.decision for n in store.now(db.list_notices)] == [Decision.REFUSE]


def test_a_refusal_whose_transaction_rolled_back_is_not_sent_once_decided_otherwise() -> None:
    """Decided ``refuse`` in a transaction that rolled back, then (trust raised meanwhile)
    decided again as a notice in one that committed: no refusal is owed."""
    store, triage = _world(Level.NOTIFY)
    ask = _ask()

    def rolled_back(conn: sqlite3.Connection) -> None:
        hold_message(conn, ask, me=ME)
        triage.applier(conn, ask)
        raise _Rollback

    with pytest.raises(_Rollback):
        store.now(rolled_back)
    store.now(lambda conn: db.save_trust(conn, TrustSettings().with_pin(BEN, Level.ASK)))
    _apply(store, triage, ask)
    assert triage.take_refusals([ask]) == ()
    assert [n.decision for n in store.now(db.list_notices)] == [Decision.NOTICE_NOW]


def test_our_own_messages_and_other_ops_are_not_decided() -> None:
    """What we signed, and ops that are not messages, leave no notice and owe nothing."""
    store, triage = _world(Level.ASK)
    _apply(store, triage, message("m1", ME, ROOM_BEN, intent=Intent.BLOCKING))
    store.now(lambda conn: triage.applier(conn, Applied(ROOM_BEN, 2, "x1", BEN, 0.0, None)))
    assert store.now(db.list_notices) == []
