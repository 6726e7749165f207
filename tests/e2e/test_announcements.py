"""What reaches a member and what stops reaching them (issue 19 items 3, 6 and 7), end to end
with real daemons, a real relay, the CLI and the real hook program.

- A decision is announced to every other member through the gate: a notice at their next hook
  event, a block in the next session's working set, and ``crosstalk decisions`` lists it.
- A refused handoff leaves nothing readable at the receiver but its refusal: no slices.
- An ask that ends unanswered (cancelled or timed out) takes its notice with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.conftest import Person, pair, wait_for_messages, wait_until
from tests.e2e.test_attention import notice, op, session
from tests.e2e.test_sessions import run_hook


def _pending(person: Person, name: str) -> set[str]:
    return {n["id"] for n in op(person, "notices", session=name, pending=True)["notices"]}


def test_a_decision_shows_at_another_members_next_hook_event(
    people: list[Person], short_tmp: Path
) -> None:
    """ana decides; ben's next hook event names it, `decisions` lists it, a new session's
    working set carries it, and reading it withdraws the notice; ana herself is not told."""
    ana, ben, _ = people
    pair(ana, ben)
    repo = short_tmp / "repo"
    repo.mkdir()
    base = {"session_id": "s-ben", "cwd": str(short_tmp), "transcript_path": None}
    run_hook(ben, "codex", "SessionStart", base)  # registered; the working set is spent
    ana.json("decide", "ship the v2 API on Monday", "--why", "clients are ready", "--repo",
             str(repo))
    shown: list[str] = []

    def announced() -> bool:
        shown.append(run_hook(ben, "codex", "PostToolUse", base))
        return "ana announced a decision" in shown[-1]

    wait_until(announced, timeout=30, what="the decision at ben's next hook event")
    assert "ship the v2 API" not in shown[-1]  # a notice names the sender, never the words
    (listed,) = ben.json("decisions")["decisions"]
    assert {k: listed[k] for k in ("text", "why", "by")} == {
        "text": "ship the v2 API on Monday", "why": "clients are ready", "by": "ana",
    }
    assert set(listed) >= {"id", "text", "why", "by", "room", "ts"}
    fresh = {**base, "session_id": "s-ben-2"}
    working = run_hook(ben, "codex", "SessionStart", fresh)
    assert "crosstalk-decisions" in working and "ship the v2 API on Monday" in working
    (message,) = ben.json("read")["messages"]
    assert message["kind"] == "decision" and "ship the v2 API on Monday" in message["text"]
    assert _pending(ben, "s-ben") == set()
    assert ana.json("read")["messages"] == []


def test_a_refused_handoff_leaves_only_its_refusal(people: list[Person]) -> None:
    """At the default level (ask) a handoff is refused: plain read shows nothing, read --all
    shows the refusal without the words, and its slice cannot be fetched."""
    ana, ben, _ = people
    pair(ana, ben)
    sent = ana.json("send", "ben", "take over the migration", "--handoff",
                    "--slice", "note:the secret plan")
    assert notice(ben, sent["id"])["decision"] == "refuse"
    assert ben.json("read")["messages"] == []
    (kept,) = ben.json("read", "--all")["messages"]
    assert kept["id"] == sent["id"] and kept["slices"] == []
    assert "take over the migration" not in kept["text"] and "refused" in kept["text"]
    error = ben.json("slice", sent["id"], "0", expect=1)["error"]
    assert error["code"] == "refused"
    assert "secret plan" not in ben.run("slice", sent["id"], "0").stdout


def _ask_waiting(asker: Person, asked: Person, text: str) -> str:
    """The id of ``asker``'s ask once it waits, surfaced, at ``asked``'s session s1."""
    found: list[str] = []

    def arrived() -> bool:
        messages: list[dict[str, Any]] = op(asked, "read")["messages"]  # no ack: stays unread
        found[:] = [m["id"] for m in messages if m["text"] == text]
        return bool(found) and found[0] in _pending(asked, "s1")

    wait_until(arrived, timeout=30, what=f"the ask {text!r} surfaced at {asked.home.name}'s")
    return found[0]


def test_an_ask_that_ends_unanswered_withdraws_its_notice(people: list[Person]) -> None:
    """ben cancels one ask (the client hangs up) and lets another time out: ana's notices
    about both are withdrawn, while both asks stay readable."""
    ana, ben, _ = people
    pair(ana, ben)
    session(ana, "s1", "idle")
    asking = ben.spawn("ask", "ana", "which port?", "--timeout", "600", "--json")
    try:
        cancelled = _ask_waiting(ben, ana, "which port?")
    finally:
        asking.kill()
        asking.wait(timeout=10)
        for stream in (asking.stdout, asking.stderr):
            if stream:
                stream.close()
    wait_until(lambda: cancelled not in _pending(ana, "s1"), timeout=30,
               what="the cancelled ask's notice to be withdrawn")
    timing_out = ben.json("ask", "ana", "which host?", "--timeout", "5", expect=1)
    assert timing_out["error"]["code"] == "no_answer"
    held: list[str] = []

    def held_at_ana() -> bool:
        held[:] = [m["id"] for m in op(ana, "read")["messages"] if m["text"] == "which host?"]
        return bool(held)

    wait_until(held_at_ana, timeout=30, what="the timed-out ask at ana's")
    timed_out = held[0]
    assert notice(ana, timed_out)["decision"] == "notice_now"
    wait_until(lambda: timed_out not in _pending(ana, "s1"), timeout=30,
               what="the timed-out ask's notice to be withdrawn")
    assert {cancelled, timed_out} <= {m["id"] for m in ana.json("read")["messages"]}


def test_decide_tell_reaches_the_person_once(people: list[Person], short_tmp: Path) -> None:
    """`decide --tell ben` in a room ben is in tells him once (the announcement), and in a room
    he is not in sends him the decision directly; either way exactly one decision reaches him.
    A later message from ana in their direct room bounds the wait: the room's log is ordered, so
    a second telling would arrive before it."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ana, cy)
    repo = short_tmp / "repo"
    repo.mkdir()
    rooms = {r["name"]: {m["label"] for m in r["members"]} for r in ana.json("room")["rooms"]}
    with_ben = next(name for name, who in rooms.items() if "ben" in who)
    with_cy = next(name for name, who in rooms.items() if "cy" in who)
    for n, (text, room) in enumerate((("use postgres", with_ben), ("keep v1", with_cy))):
        ana.json("decide", text, "--repo", str(repo), "--room", room, "--tell", "ben")
        ana.json("send", "ben", f"marker {n}")
        got = wait_for_messages(ben, 2)
        assert [m["kind"] for m in got] == ["decision", "message"], got
        assert text in got[0]["text"] and got[1]["text"] == f"marker {n}"
