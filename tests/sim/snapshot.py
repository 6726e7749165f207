"""What each node's store says at the end of a run (read through its own Store, inline)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crosstalk.store.ids import from_db
from crosstalk.store.memory import parse_envelope
from crosstalk.store.messages import delivery_state
from crosstalk.wire.room_ops import Rekey


def _rows(conn: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cur = conn.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def read_state(conn: sqlite3.Connection) -> dict[str, Any]:
    """Rooms, rosters, held messages, sent messages' states, tasks and applied op ids."""
    # ``removed_at``: we were removed (the row stays, ``state`` still says joined, so the
    # ``room`` view can say "removed from #r by ana"); the roster checker counts it as out.
    rooms = {r["room_id"]: r for r in _rows(
        conn, "SELECT room_id, name, kind, state, removed_at FROM rooms")}
    roster: dict[str, dict[str, str]] = {}
    for m in _rows(conn, "SELECT * FROM room_members"):
        if not m.get("gone", 0):
            roster.setdefault(m["room_id"], {})[m["fingerprint"]] = m["state"]
    held = {
        from_db(r["message_id"]): {"room": r["room_id"], "read": r["read_at"] is not None,
                          "sender": r["sender"], "text": json.loads(r["body"]).get("text")}
        for r in _rows(conn, "SELECT message_id, room_id, read_at, sender, body FROM held_messages")
    }
    sent = {}
    for r in _rows(conn, "SELECT msg_id, room_id, text FROM sent_messages"):
        state: Any = delivery_state(conn, r["msg_id"])
        # (state, reason) once refusals carry a reason; a bare state before that.
        sent[r["msg_id"]] = {"room": r["room_id"], "state": state[0] if isinstance(state, tuple)
                             else state, "text": r["text"]}
    tasks: dict[str, dict[str, Any]] = {}
    for r in _rows(conn, "SELECT room_id, record_id, body FROM memory_records WHERE kind='task'"):
        body = json.loads(r["body"])
        claimer = body.get("claimer")
        tasks[r["record_id"]] = {
            "room": r["room_id"], "state": body.get("state"),
            "claimer": claimer.get("fingerprint") if isinstance(claimer, dict) else None,
        }
    outcomes = [r["op_id"] for r in _rows(conn, "SELECT op_id FROM memory_outcomes")]
    cursors = {r["room_id"]: r["seq"] for r in _rows(conn, "SELECT * FROM relay_cursors")}
    inbound: dict[str, list[str]] = {}
    for r in _rows(conn, "SELECT room_id, op_id FROM relay_inbound ORDER BY seq"):
        inbound.setdefault(r["room_id"], []).append(r["op_id"])
    facts: dict[str, list[str]] = {}
    for r in _rows(conn, "SELECT room_id, record_id FROM memory_records WHERE kind='fact' "
                         "ORDER BY record_id"):
        facts.setdefault(r["room_id"], []).append(r["record_id"])
    holes = {r["room_id"]: r["hole_from"] for r in _rows(
        conn, "SELECT room_id, hole_from FROM memory_rooms WHERE hole_from IS NOT NULL")}
    alarms = {r["room_id"]: r["reason"] for r in _rows(
        conn, "SELECT room_id, reason FROM membership_alarms")}
    memory_seq = {r["room_id"]: r["last_seq"] for r in _rows(
        conn, "SELECT room_id, last_seq FROM memory_rooms")}
    # Memories that gave ops up and were not repaired: what they decide is provisional.
    gave_up = sorted(r["room_id"] for r in _rows(
        conn, "SELECT room_id FROM memory_rooms WHERE conceded = 1"))
    # Each room of two's first key (a pairing's grant), to compare both ends'.
    pair_keys = {r["room_id"]: bytes(r["key"]).hex() for r in _rows(
        conn, "SELECT k.room_id, k.key FROM room_keys k JOIN rooms USING (room_id) "
              "WHERE kind = 'direct' AND k.epoch = 0")}
    return {
        "pair_keys": pair_keys, "books": _books(conn), "rekeys": _own_rekeys(conn),
        "memory_seq": memory_seq, "memory_holes": holes, "memory_gave_up": gave_up,
        "facts": facts, "alarms": alarms,
        "rooms": rooms, "roster": roster, "held": held, "sent": sent, "tasks": tasks,
        "applied": outcomes, "cursors": cursors,
        "inbound": inbound,
    }


def _books(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """Each room's reservation book as stored: where it stands, what holds, what each op did."""
    books: dict[str, dict[str, Any]] = {
        r["room_id"]: {"last_seq": r["last_seq"], "clock": r["clock"], "held": {}, "outcomes": {}}
        for r in _rows(conn, "SELECT room_id, last_seq, clock FROM reservation_books")
    }
    for r in _rows(conn, "SELECT room_id, reservation_id, body FROM reservation_held"):
        books[r["room_id"]]["held"][r["reservation_id"]] = json.loads(r["body"])
    for r in _rows(conn, "SELECT room_id, op_id, body FROM reservation_outcomes"):
        books[r["room_id"]]["outcomes"][r["op_id"]] = json.loads(r["body"])
    return books


def _own_rekeys(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(room, op id, removed)`` of the rekeys this node sent that it still keeps (the relay
    never echoes them; the checker finds their seq in the relay's own log by op id)."""
    out = []
    for r in _rows(conn, "SELECT room_id, op_id, body FROM memory_sent WHERE kind = 'Rekey'"):
        op = parse_envelope(r["body"])
        if isinstance(op, Rekey):
            out.append((r["room_id"], r["op_id"], op.removed))
    return out
