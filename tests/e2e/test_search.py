"""Search end to end: real relay, real daemons, `crosstalk search` as people use it."""

from __future__ import annotations

from typing import Any

from crosstalk.client import call
from crosstalk.paths import Home
from tests.e2e.conftest import Person, pair, wait_until


def found(person: Person, query: str, **params: Any) -> list[dict[str, Any]]:
    """The search straight through the person's control socket (no CLI start-up per poll)."""
    return list(call(Home(person.home), "search", {"query": query, **params},
                     timeout=60.0)["results"])


def test_ana_finds_what_ben_sent_her_and_nothing_from_a_room_she_never_joined(
    people: list[Person],
) -> None:
    """ben's messages and fact reach ana's index; what ben told cy in their own room never
    does; her left room keeps what she held there; filters and bad queries behave."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ben, cy)
    ben.json("send", "ana", "the billing migration finished at noon")
    ben.json("send", "ana", "lunch?\x1b]0;owned\x07 and the migration")
    ben.json("facts", "add", "billing migrations run nightly", "--room", "ana")
    ben.json("send", "cy", "a secret migration plan, for cy only")
    ana.json("room", "create", "team")
    ana.json("room", "invite", "team", "ben")
    wait_until(lambda: any(r["name"] == "team" for r in ben.json("room")["rooms"]),
               timeout=30, what="the invitation at ben's")
    ben.json("room", "accept", "team")
    ben.json("send", "#team", "team migration notes")

    wait_until(lambda: len(found(ana, "migration")) == 4, timeout=60,
               what="ben's three messages and his fact in ana's index")
    wait_until(lambda: len(found(cy, "secret")) == 1, timeout=60, what="cy's message")
    assert found(ana, "secret") == []

    results = ana.json("search", "migration")["results"]
    assert {(r["kind"], r["room"], r["from"]) for r in results} == {
        ("message", "ben", "ben"), ("fact", "ben", "ben"), ("message", "team", "ben"),
    }
    assert all("[migration" in r["snippet"] for r in results)
    assert set(results[0]) == {"kind", "id", "room", "from", "snippet", "ts"}
    (fact,) = ana.json("search", "billing", "--kind", "fact")["results"]
    assert fact["snippet"] == "[billing] migrations run nightly"
    assert len(ana.json("search", "migration", "--from", "ben", "--since", "1")["results"]) == 4
    assert ana.json("search", "migration", "--room", "team")["results"][0]["snippet"] == (
        "team [migration] notes"
    )

    human = ana.run("search", "lunch")
    assert human.returncode == 0, human.stderr
    (line,) = human.stdout.splitlines()
    assert "ben: [lunch]?\\x1b]0;owned\\x07 and the migration" in line
    assert "\x1b" not in human.stdout and "\x07" not in human.stdout

    ana.json("room", "leave", "team")
    kept = ana.json("search", "notes", "--room", "team")["results"]
    assert [(r["room"], r["snippet"]) for r in kept] == [("team", "team migration [notes]")]

    bad = ana.json("search", '"unbalanced', expect=2)
    assert bad["error"]["code"] == "usage"
    unknown = ana.json("search", "migration", "--from", "cy", expect=1)
    assert unknown["error"]["code"] == "unknown_peer"
