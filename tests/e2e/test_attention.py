"""The attention gate end to end: real daemons paired through a real relay, messages sent with
the CLI, decisions read back through the daemon's control ops (the ones the hooks will use)."""

from __future__ import annotations

import time
from typing import Any

from crosstalk.client import call
from crosstalk.paths import Home
from tests.e2e.conftest import Person, pair, read_json_line, reap, wait_until

ARRIVAL = 30.0


def op(person: Person, op_name: str, **params: Any) -> dict[str, Any]:
    """One control op on ``person``'s running daemon."""
    return call(Home.resolve(str(person.home)), op_name, params)


def notice(person: Person, message_id: str) -> dict[str, Any]:
    """The gate's decision for ``message_id`` at ``person``, once it arrived (bounded wait)."""
    found: list[dict[str, Any]] = []

    def decided() -> bool:
        found[:] = [n for n in op(person, "notices")["notices"] if n["id"] == message_id]
        return bool(found)

    wait_until(decided, timeout=ARRIVAL, what=f"{person.home.name} to decide {message_id}")
    return found[0]


def send(sender: Person, to: str, text: str, *extra: str) -> str:
    return str(sender.json("send", to, text, *extra)["id"])


def session(person: Person, name: str, status: str) -> dict[str, Any]:
    op(person, "session_register", name=name, client="claude", project="repo")
    return op(person, "session_status", name=name, status=status)


def pair_with_bot(person: Person, bot: Person) -> None:
    """Pair ``person`` with ``bot``, which joins with --agent."""
    new = person.spawn("room", "new", "--json", "--label", person.home.name)
    try:
        invite = read_json_line(new, timeout=60)
        bot.json("room", "join", invite["invite"], "--label", bot.home.name, "--agent")
        assert read_json_line(new, timeout=60)["joined"] == bot.home.name
        assert new.wait(timeout=30) == 0
    finally:
        reap(new)


def test_a_bot_stays_at_notify_even_when_trusted_deliver(people: list[Person]) -> None:
    """A bot pinned at deliver gets a notice, never words; `trust` says why."""
    ana, ben, _ = people
    pair_with_bot(ana, ben)
    shown = ana.json("trust", "ben", "deliver")
    assert shown["people"] == {"ben": "deliver"}
    explained = ana.json("trust", "ben")["explain"]
    assert "capped at notify because ben is a bot" in explained
    session(ana, "s1", "idle")
    got = notice(ana, send(ben, "ana", "deploy finished", "--intent", "blocking"))
    assert (got["decision"], got["label"]) == ("notice_now", "ben")


def test_fyi_waits_for_idle_and_surfaces_once_while_blocking_surfaces_now(
    people: list[Person],
) -> None:
    """fyi to a busy session is held until it goes idle, then surfaces once; blocking lands now."""
    ana, ben, _ = people
    pair(ana, ben)
    session(ana, "s1", "busy")
    fyi = notice(ana, send(ben, "ana", "fyi: renamed the config key"))
    assert (fyi["decision"], fyi["due"], fyi["surfaced_at"]) == ("notice_when_idle", "idle", None)
    assert ana.json("attention") == {"reached_last_hour": 0, "held": 1, "by_source": {}}

    blocking = notice(ana, send(ben, "ana", "prod is down", "--intent", "blocking"))
    assert blocking["decision"] == "notice_now" and blocking["surfaced_at"] is not None
    assert notice(ana, fyi["id"])["surfaced_at"] is None  # still waiting: the session is busy

    idle = op(ana, "session_status", name="s1", status="idle")
    assert [(b["label"], b["items"]) for b in idle["surfaced"]] == [("ben", [fyi["id"]])]
    assert op(ana, "session_status", name="s1", status="idle")["surfaced"] == []
    assert ana.json("attention") == {"reached_last_hour": 2, "held": 0, "by_source": {"ben": 2}}
    pending = [n["id"] for n in op(ana, "notices", session="s1", pending=True)["notices"]]
    assert sorted(pending) == sorted([fyi["id"], blocking["id"]])
    assert op(ana, "notice_shown", session="s1", ids=pending)["shown"] == 2
    assert op(ana, "notices", session="s1", pending=True)["notices"] == []
    human = ana.run("attention").stdout
    assert "reached you  2 in the last hour" in human and "ben" in human


def test_a_timed_mute_holds_and_the_mute_level_drops(people: list[Person]) -> None:
    """`mute ben 10` holds his question until lifted; `trust ben mute` drops, kept for --all."""
    ana, ben, _ = people
    pair(ana, ben)
    session(ana, "s1", "idle")
    before = time.time()
    muted = ana.json("mute", "ben", "10")
    assert muted["muted"] == ["ben"] and before + 599 < muted["until"] < time.time() + 601

    held = notice(ana, send(ben, "ana", "got a minute?", "--intent", "question"))
    assert (held["decision"], held["surfaced_at"]) == ("hold_quiet", None)
    assert op(ana, "session_status", name="s1", status="idle")["surfaced"] == []
    lifted = ana.json("mute", "ben", "0")
    assert (lifted["muted"], lifted["until"], lifted["by"]) == ([], None, [])
    wait_until(
        lambda: notice(ana, held["id"])["surfaced_at"] is not None,
        timeout=ARRIVAL,
        what="the held question to surface once the mute is lifted",
    )
    ana.json("read")  # everything so far is read

    ana.json("trust", "ben", "mute")
    dropped = notice(ana, send(ben, "ana", "urgent!!", "--intent", "blocking"))
    assert (dropped["decision"], dropped["surfaced_at"]) == ("drop", None)
    assert ana.json("read")["messages"] == []
    assert dropped["id"] in {m["id"] for m in ana.json("read", "--all")["messages"]}


def test_naming_a_louder_room_in_the_payload_gains_nothing(people: list[Person]) -> None:
    """ben names cy's deliver room in his message; only the room it arrived in counts."""
    ana, ben, cy = people
    pair(ana, ben)
    _, with_cy = pair(cy, ana)
    loud = with_cy["room"]
    assert ana.json("trust", loud, "deliver")["rooms"] == {"cy": "deliver"}
    session(ana, "s1", "idle")
    borrowed = notice(ana, send(ben, "ana", "let me in", "--intent", "blocking", "--thread", loud))
    assert borrowed["decision"] == "notice_now"
    assert borrowed["room"] != loud
    through = notice(ana, send(cy, "ana", "from the loud room", "--intent", "blocking"))
    assert (through["decision"], through["room"]) == ("deliver_now", loud)
