"""`peers`, `rename` and `cost` from what the daemon knows first-hand."""

from __future__ import annotations

from tests.e2e.conftest import Person, pair, wait_for_messages, wait_until


def test_peers_rename_and_cost(people: list[Person]) -> None:
    """A paired peer shows online with a level and unread count; renames stick; cost counts."""
    ana, ben, _ = people
    pair(ana, ben)
    ben.json("send", "ana", "one")
    ben.json("send", "ana", "two")

    def ben_seen() -> dict[str, object] | None:
        listing = ana.json("peers")
        return next((p for p in listing["peers"] if p["label"] == "ben"), None)

    wait_until(lambda: (ben_seen() or {}).get("unread") == 2, timeout=30, what="two unread")
    view = ben_seen()
    assert view is not None and view["level"] == "ask" and view["muted"] is False
    wait_until(lambda: (ben_seen() or {}).get("online") is True, timeout=30, what="presence")
    assert ana.json("peers")["me"]["label"] == "ana"

    assert ana.json("rename", "ben", "benny") == {"renamed": "ben", "to": "benny"}
    assert [m["from"] for m in wait_for_messages(ana, 2)] == ["benny", "benny"]
    ana.json("send", "benny", "hi benny")
    assert ana.json("rename", "me", "anastasia")["to"] == "anastasia"
    assert ana.json("status")["label"] == "anastasia"
    row = next(r for r in ana.json("cost")["rows"] if r["peer"] == "benny")
    assert row["sent"] == 1 and row["received"] == 2 and row["tokens_out"] >= 1
