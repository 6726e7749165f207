"""Named rooms end to end: invitations held until accepted, decline, leave, kick with rekey."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crosstalk import crypto
from crosstalk.store.identity import load_identity
from crosstalk.wire.room_ops import unframe_body
from tests.e2e.conftest import Person, pair, wait_for_messages, wait_until


@pytest.fixture
def trio_of(people: list[Person]) -> list[Person]:
    """ana paired with ben and with cy."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ana, cy)
    return people


def _room(person: Person, name: str) -> dict[str, object] | None:
    rooms = person.json("room")["rooms"]
    return next((r for r in rooms if r["name"] == name), None)


def test_invitation_is_held_until_accepted_and_decline_drops_it(trio_of: list[Person]) -> None:
    """Nothing from a room reaches an invitee before accepting; declining removes it."""
    ana, ben, cy = trio_of
    ana.json("room", "create", "team")
    assert ana.json("room", "invite", "team", "ben", "cy")["invited"] == ["ben", "cy"]
    wait_until(lambda: _room(ben, "team") is not None, timeout=30, what="ben's invitation")
    wait_until(lambda: _room(cy, "team") is not None, timeout=30, what="cy's invitation")
    assert _room(ben, "team")["pending"] is True  # type: ignore[index]
    ana.json("send", "#team", "before anyone accepted")
    assert ben.json("send", "#team", "x", expect=1)["error"]["code"] == "not_a_member"
    ben.json("room", "accept", "team")
    cy.json("room", "decline", "team")
    assert _room(cy, "team") is None
    ana.json("send", "#team", "after ben accepted")
    texts = [m["text"] for m in wait_for_messages(ben, 1)]
    assert "after ben accepted" in texts
    ben.json("send", "#team", "hello room")
    assert "hello room" in [m["text"] for m in wait_for_messages(ana, 1)]
    # Sent while ben was only invited: it never reached him, before or after accepting.
    everything = [m["text"] for m in ben.json("read", "--all")["messages"]]
    assert "before anyone accepted" not in everything


def _relay_rows(relay_db: Path, room_id: str) -> int:
    """How many rows of the relay's database mention ``room_id`` (in any ``room`` column)."""
    with sqlite3.connect(relay_db) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return sum(
            db.execute(f"SELECT count(*) FROM {t} WHERE room = ?", (room_id,)).fetchone()[0]
            for t in tables
            if "room" in [c[1] for c in db.execute(f"PRAGMA table_info({t})")]
        )


def test_leave_and_last_leave_deletes_the_room_on_the_relay(trio_of: list[Person]) -> None:
    """Leaving takes the room off this machine; when the last member leaves the relay drops it."""
    ana, ben, _ = trio_of
    room_id = ana.json("room", "create", "short")["id"]
    ana.json("room", "invite", "short", "ben")
    wait_until(lambda: _room(ben, "short") is not None, timeout=30, what="the invitation")
    ben.json("room", "accept", "short")
    relay_db = ana.relay_data / "relay.db"
    assert relay_db.exists() and _relay_rows(relay_db, room_id) > 0
    ben.json("room", "leave", "short")
    assert _room(ben, "short") is None
    ana.json("room", "leave", "short")
    assert _room(ana, "short") is None
    assert _relay_rows(relay_db, room_id) == 0


def test_kicked_member_cannot_open_what_is_sent_after(trio_of: list[Person]) -> None:
    """After a kick the room key changes: the removed member's key opens nothing new."""
    ana, ben, cy = trio_of
    ana.json("room", "create", "crew")
    ana.json("room", "invite", "crew", "ben", "cy")
    for person in (ben, cy):
        wait_until(lambda p=person: _room(p, "crew") is not None, timeout=30, what="invitation")
        person.json("room", "accept", "crew")
    ana.json("send", "#crew", "everyone can read this")
    for person in (ben, cy):
        assert "everyone can read this" in [m["text"] for m in wait_for_messages(person, 1)]
    kicked = ana.json("room", "kick", "crew", "cy")
    assert kicked["epoch"] == 1 and kicked["removed"] == "cy"
    ana.json("send", "#crew", "secret after the kick")
    assert "secret after the kick" in [m["text"] for m in wait_for_messages(ben, 1)]
    assert cy.json("read")["messages"] == []
    # Hand cy the raw op anyway: its keys for the room open nothing sent after the kick.
    room_id = next(r["id"] for r in ana.json("room")["rooms"] if r["name"] == "crew")
    with sqlite3.connect(ben.home / "state.db") as db:
        raw = db.execute(
            "SELECT op_id, sender, body FROM relay_inbound WHERE room_id = ? ORDER BY seq DESC",
            (room_id,),
        ).fetchone()
    with sqlite3.connect(cy.home / "state.db") as db:
        cy_keys = [
            bytes(k)
            for (k,) in db.execute("SELECT key FROM room_keys WHERE room_id = ?", (room_id,))
        ]
    epoch, sealed = unframe_body(bytes(raw[2]))
    assert epoch == 1 and cy_keys
    ana_id = load_identity(ana.home / "identity.json")
    assert ana_id is not None
    for key in cy_keys:
        with pytest.raises(crypto.OpenFailed):
            crypto.open_op(
                key,
                sealed,
                sender_ed_pub=ana_id.ed25519_public,
                room_id=room_id,
                epoch=epoch,
                op_id=raw[0],
            )


def test_an_invitee_who_accepts_after_a_rekey_reads_what_follows(trio_of: list[Person]) -> None:
    """cy is still only invited when ana removes ben: the rekey op never reaches cy (a cursor
    starts at accept), so ana sends cy the new key through their room of two; after accepting,
    cy opens what ana sends under the new epoch."""
    ana, ben, cy = trio_of
    ana.json("room", "create", "moving")
    ana.json("room", "invite", "moving", "ben", "cy")
    wait_until(lambda: _room(ben, "moving") is not None, timeout=30, what="ben's invitation")
    wait_until(lambda: _room(cy, "moving") is not None, timeout=30, what="cy's invitation")
    ben.json("room", "accept", "moving")
    assert ana.json("room", "kick", "moving", "ben")["epoch"] == 1
    cy.json("room", "accept", "moving")
    ana.json("send", "#moving", "after the rekey")
    assert [m["text"] for m in wait_for_messages(cy, 1)] == ["after the rekey"]


def _sent_state(person: Person, msg_id: str) -> str:
    (entry,) = [m for m in person.json("sent")["messages"] if m["id"] == msg_id]
    return str(entry["state"])


def test_leaving_keeps_what_we_sent_true_and_we_can_be_invited_back(
    trio_of: list[Person],
) -> None:
    """After ben leaves, the message he sent there still says how far it got (it said queued
    once its room was gone: found by the simulation); invited again, he is back in."""
    ana, ben, _ = trio_of
    ana.json("room", "create", "again")
    ana.json("room", "invite", "again", "ben")
    wait_until(lambda: _room(ben, "again") is not None, timeout=30, what="the invitation")
    ben.json("room", "accept", "again")
    ana.json("daemon", "stop")  # so that ben's message stays at the relay: sent, not delivered
    msg = ben.json("send", "#again", "before leaving")["id"]
    wait_until(lambda: _sent_state(ben, msg) == "sent", timeout=30, what="the relay's seq")
    ben.json("room", "leave", "again")
    assert _room(ben, "again") is None
    assert _sent_state(ben, msg) == "sent"
    ana.json("room", "invite", "again", "ben")
    wait_until(lambda: _room(ben, "again") is not None, timeout=30, what="the new invitation")
    ben.json("room", "accept", "again")
    ana.json("send", "#again", "welcome back")
    assert [m["text"] for m in wait_for_messages(ben, 1)] == ["welcome back"]
