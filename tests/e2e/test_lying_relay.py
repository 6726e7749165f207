"""A relay operator who puts a removed member back: real relay, real daemons, real SQLite.

After ``room kick crew ben``, the operator stops the relay, flips ben's member row back to
joined in its database (the adder's old signature on it still verifies) and starts it again.
Ben, colluding, names himself in the room under the epoch he holds (his own daemon no longer
does: the history it fetches has him out), which used to make every remaining member list ben
again and answer him with the newer epoch's key. Members now believe the room's signed
membership history, where ben is removed: nobody lists him, nobody shares a key with him, what
cy sends next reaches his daemon and stays unreadable, and ana and cy are told the relay lists
someone the history does not.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from crosstalk import crypto
from crosstalk.store.identity import load_identity
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import MemberNamed, encode_op, frame_body
from tests.e2e.conftest import Person, pair, stop_pid, wait_for_messages, wait_until
from tests.relay.client import Identity, open_client
from tests.relay.process import RelayProcess


@pytest.fixture
def lying_setup(short_tmp: Path) -> Iterator[tuple[RelayProcess, list[Person]]]:
    relay = RelayProcess(short_tmp / "relay-data", short_tmp / "relay.stderr")
    relay.start()
    people = [Person(short_tmp / name, relay.url) for name in ("ana", "ben", "cy")]
    try:
        yield relay, people
    finally:
        for person in people:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        relay.kill(signal.SIGTERM)


def _room(person: Person, name: str) -> dict[str, object] | None:
    return next((r for r in person.json("room")["rooms"] if r["name"] == name), None)


def _members(person: Person, name: str) -> set[str]:
    room = _room(person, name)
    return {str(m["label"]) for m in room["members"]} if room else set()  # type: ignore[attr-defined]


def _holds_op_from(person: Person, room_id: str, sender: str, after_seq: int) -> bool:
    with sqlite3.connect(person.home / "state.db") as db:
        row = db.execute(
            "SELECT 1 FROM relay_inbound WHERE room_id = ? AND sender = ? AND seq > ?",
            (room_id, sender, after_seq),
        ).fetchone()
    return row is not None


async def _name_himself(ben: Person, port: int, room_id: str) -> None:
    """Post ben's ``MemberNamed`` for himself, sealed under the room key he holds, through a
    connection of his own (the relay's rows say he is joined, so it takes the post)."""
    record = load_identity(ben.home / "identity.json")
    assert record is not None
    keys = crypto.Keys(record.signing_seed, record.box_secret)
    with sqlite3.connect(ben.home / "state.db") as db:
        key = bytes(db.execute("SELECT key FROM room_keys WHERE room_id = ? AND epoch = 0",
                               (room_id,)).fetchone()[0])
    op_id = os.urandom(16).hex()
    sealed = crypto.seal_op(keys, key, encode_op(MemberNamed({keys.fingerprint: "ben"})),
                            room_id=room_id, epoch=0, op_id=op_id, nonce=os.urandom(24))
    with trio.fail_after(30):
        async with open_client(port, Identity(record.signing_seed), device="colluding") as me:
            posted = await me.ok(w.Post(me.next_req(), room_id, op_id, frame_body(0, sealed)))
    assert isinstance(posted, w.Posted)


def _epochs_held(person: Person, room_id: str) -> set[int]:
    with sqlite3.connect(person.home / "state.db") as db:
        return {int(e) for (e,) in db.execute(
            "SELECT epoch FROM room_keys WHERE room_id = ?", (room_id,))}


def test_a_relay_that_flips_a_kicked_member_back_gets_them_no_key_and_is_reported(
    lying_setup: tuple[RelayProcess, list[Person]],
) -> None:
    """The kicked member is listed by nobody, gets no newer key, reads nothing sent after; the
    members are told the relay lists someone the signed history does not."""
    relay, (ana, ben, cy) = lying_setup
    pair(ana, ben)
    pair(ana, cy)
    room_id = ana.json("room", "create", "crew")["id"]
    ana.json("room", "invite", "crew", "ben", "cy")
    for person in (ben, cy):
        wait_until(lambda p=person: _room(p, "crew") is not None, timeout=30, what="invitation")
        person.json("room", "accept", "crew")
    wait_until(lambda: _members(cy, "crew") >= {"ana", "ben", "cy"}, timeout=30,
               what="cy sees the whole crew")
    assert cy.json("room", "kick", "crew", "ben")["epoch"] == 1
    wait_until(lambda: "ben" not in _members(ana, "crew"), timeout=30, what="ana sees the kick")
    ben_fp = ben.json("status")["fingerprint"]
    cy_fp = cy.json("status")["fingerprint"]

    # The operator's lie: ben's row back to joined, nothing signed anew.
    relay.kill(signal.SIGTERM)
    with sqlite3.connect(relay.data / "relay.db") as db:
        flipped = db.execute(
            "UPDATE members SET state = 'joined' WHERE room = ? AND fingerprint = ?",
            (room_id, ben_fp),
        ).rowcount
        head = db.execute("SELECT head FROM rooms WHERE room = ?", (room_id,)).fetchone()[0]
    assert flipped == 1
    back = RelayProcess(relay.data, relay.stderr_path, "--port", str(relay.port))
    back.start(timeout=60.0)
    relay.proc = back.proc  # stopped by the fixture, by pid

    # Everyone reconnects; ben names himself in the room, as his daemon once did by itself.
    trio.run(_name_himself, ben, back.port, room_id)
    wait_until(lambda: _holds_op_from(ana, room_id, ben_fp, head), timeout=60,
               what="ben's op after the flip reaches ana")
    for person in (ana, cy):
        wait_until(lambda p=person: (_room(p, "crew") or {}).get("relay_alarm") is not None,
                   timeout=60, what=f"{person.home.name} is told the relay lies")
        alarm = str(_room(person, "crew")["relay_alarm"])  # type: ignore[index]
        assert ben_fp[:9] in alarm
        assert "ben" not in _members(person, "crew")
        assert f"warning: {alarm}" in person.run("room").stdout  # people see it too
    cy.json("send", "#crew", "after the flip")
    assert "after the flip" in [m["text"] for m in wait_for_messages(ana, 1)]
    wait_until(lambda: _holds_op_from(ben, room_id, cy_fp, head), timeout=60,
               what="cy's message reaches ben's daemon")
    assert _epochs_held(ben, room_id) == {0}
    texts = [m["text"] for m in ben.json("read", "--all")["messages"]]
    assert "after the flip" not in texts
