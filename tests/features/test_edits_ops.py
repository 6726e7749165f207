"""The edits ops on a host that has only what they ask for: a real store, a real repository on
disk, a stand-in ``reservations`` op (the lead's feature), no relay."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from crosstalk.actors.children import start_children
from crosstalk.actors.control import OpTable
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.features.edits import ops as edits_ops
from crosstalk.store import edits as db
from crosstalk.store.db import Store, open_store
from crosstalk.wire.control.params import ReservationsParams
from crosstalk.wire.control.replies.memory import ReservationsReply, ReservationView
from crosstalk.wire.control.table_memory import RESERVATIONS
from crosstalk.wire.room_ops import EditedPath, EditsPublished, RoomOp
from tests.actors.fakes import running

ME, BEN = "me" * 8, "be" * 8


def _reservation(**kw: Any) -> ReservationView:
    return ReservationView(**{
        "id": "v1", "holder": "cy", "holder_fingerprint": "cy" * 8, "mine": False,
        "paths": ["src/**"], "repo": "SHOP", "room": "team", "room_id": "r1",
        "until": 9e9, "shared": False, "reason": "moving the API", "granted_at": 0.0, **kw})


def _world(conn: sqlite3.Connection) -> None:
    for room in ("r1", "r2", "r3"):
        conn.execute(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, ?, 'shared', 'joined', 0)", (room, f"room-{room}"),
        )
    conn.execute(
        "INSERT INTO peer_sessions (fingerprint, room_id, name, project, status, last_seen, "
        "published_at) VALUES (?, 'r2', 'ben-1', 'Shop', 'busy', 0, 0)", (BEN,),
    )
    conn.execute(  # a roommate we never paired with: named by the room's roster
        "INSERT INTO room_members (room_id, fingerprint, label, signing_key, box_key, state) "
        "VALUES ('r2', ?, 'ben', ?, ?, 'member')", (BEN, b"k" * 32, b"x" * 32),
    )


async def _host(store: Store, supervisor: Supervisor, rows: list[ReservationView]) -> OpTable:
    async def no_send(room_id: str, op: RoomOp, *, op_id: str | None = None) -> str:
        return "op"

    async def reservations(_: ReservationsParams) -> ReservationsReply:
        return ReservationsReply(rows, 0.0)  # their clock: "until" counts from this now

    ops = OpTable()
    ops.add(RESERVATIONS, reservations)
    host = SimpleNamespace(store=store, supervisor=supervisor, send_op=no_send, ops=ops,
                           identity=object(), keys=SimpleNamespace(fingerprint=ME))
    plugs = edits_ops.plug(cast(edits_ops.Host, host))
    for control_op in plugs.ops:
        control_op.install(ops)
    await start_children(supervisor, plugs.children)
    [applier] = plugs.appliers
    now = time.time()

    def ben_edited(conn: sqlite3.Connection) -> None:
        op = EditsPublished("shop", "ben-1", (EditedPath("src/api.py", now - 120),), "auth fix")
        applier(conn, Applied("r2", 1, "o1", BEN, now, op))

    await store.write(ben_edited)
    return ops


def _repo(tmp_path: Path, name: str = "shop", room: str | None = "r1") -> Path:
    repo = tmp_path / name
    (repo / ".git").mkdir(parents=True)
    if room:
        (repo / ".crosstalk").mkdir()
        (repo / ".crosstalk" / "project.json").write_text(json.dumps({"room": room}))
    return repo


async def test_check_names_others_edits_of_that_file_only(tmp_path: Path) -> None:
    """ben's agent changed src/api.py in his shop: our check of it (relative path, a
    same-named repository) names him; another file says nothing."""
    repo = _repo(tmp_path)
    async with open_store(tmp_path / "state.db") as store, \
            running(Supervisor(heartbeat=5.0)) as supervisor:
        await store.write(_world)
        ops = await _host(store, supervisor, [])
        reply = await ops.call("edits_check", {"session": "s1", "cwd": str(repo),
                                               "paths": ["src/api.py"]})
        assert reply["decision"] == "allow"
        assert "ben's agent (session ben-1) changed src/api.py in shop 2 minutes ago" in (
            reply["text"])
        quiet = await ops.call("edits_check", {"session": "s1", "cwd": str(repo),
                                               "paths": ["src/other.py"]})
        assert quiet == {"text": None, "decision": "allow"}


async def test_an_exclusive_reservation_asks_or_refuses_as_the_person_set(
    tmp_path: Path,
) -> None:
    """cy holds src/** exclusively: allow by default (with the text), deny once set to block;
    our own reservation and a shared one never refuse."""
    repo = _repo(tmp_path)
    rows = [_reservation(), _reservation(holder="me", mine=True),
            _reservation(paths=["docs/**"])]
    async with open_store(tmp_path / "state.db") as store, \
            running(Supervisor(heartbeat=5.0)) as supervisor:
        await store.write(_world)
        ops = await _host(store, supervisor, rows)
        asked = {"session": "s1", "cwd": str(repo), "paths": [str(repo / "src" / "x.py")]}
        first = await ops.call("edits_check", asked)
        assert first["decision"] == "allow"
        assert "cy has reserved src/x.py in SHOP" in first["text"]
        assert "moving the API" in first["text"] and "me has" not in first["text"]
        await ops.call("edits", {"on_reserved": "block"})
        assert (await ops.call("edits_check", asked))["decision"] == "deny"
        rows[0] = _reservation(shared=True)
        assert (await ops.call("edits_check", asked))["decision"] == "allow"


async def test_touched_records_the_set_and_names_only_sharing_rooms(tmp_path: Path) -> None:
    """shop is bound to r1 and ben works in Shop in r2; r3 shares nothing. With r2 off, only
    r1. A file outside any repository records nothing."""
    repo = _repo(tmp_path)
    async with open_store(tmp_path / "state.db") as store, \
            running(Supervisor(heartbeat=5.0)) as supervisor:
        await store.write(_world)
        ops = await _host(store, supervisor, [])
        params = {"session": "s1", "cwd": str(repo), "paths": ["src/a.py", "/tmp/../etc/x"]}
        reply = await ops.call("edits_touched", params)
        assert reply == {"files": [{"repo": "shop", "path": "src/a.py"}], "rooms": ["r1", "r2"]}
        await ops.call("edits", {"room": "room-r2", "share": False})
        assert (await ops.call("edits_touched", params))["rooms"] == ["r1"]
        shown = await ops.call("edits", {})
        assert [(e["session"], e["path"]) for e in shown["mine"]] == [("s1", "src/a.py")]
        assert [(e["label"], e["path"]) for e in shown["edits"]] == [("ben", "src/api.py")]
        assert {r["id"]: r["share"] for r in shown["rooms"]} == {"r1": True, "r2": False,
                                                                 "r3": True}
        assert await store.read(lambda c: db.own_set(c, "s1", "shop")) != []
