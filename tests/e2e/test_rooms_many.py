"""Rooms of three and more, end to end (issue #18): a real relay, a daemon per home, the real CLI.

Five homes sit in a circle of pairings (ana-ben, ben-dan, dan-eve, eve-carl, carl-ana), made once
for the module: each person is paired with two others only, so every room of three or more holds
members who never paired (ben and carl, for instance). Each test uses rooms of its own.

Waits are bounded polls on a condition. Polls ask the daemons over their control sockets (the
same replies the CLI prints with ``--json``, a few milliseconds each instead of a CLI start-up);
what a person does, and the final look at each outcome, goes through the CLI.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.client import call
from crosstalk.paths import Home
from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import (
    Person,
    pair,
    pid_alive,
    stop_pid,
    wait_until,
)
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e

CIRCLE = ("ana", "ben", "dan", "eve", "carl")  # each is paired with its two neighbours
SETTLE = 30.0  # bound for anything that travels through the relay to every member

# The issue promises that a decline or a leave shows at every other member "within a second".
# We start the clock when the command has returned (so the CLI's own start-up, ~150 ms here, is
# not counted) and poll the other daemons every 20 ms. What is measured is a relay push and one
# SQLite commit per member: tens of milliseconds on an idle machine. This 2-core machine is
# shared with other engineers' test runs, though, and four daemons plus the relay compete for it,
# so scheduling stalls of several hundred milliseconds happen; asserting exactly 1 s would make
# the test flaky without telling us more. We assert 2 s: still well under the 5 s heartbeat, the
# next thing that would repair a missed push, so passing proves the change is pushed, not found
# later by a periodic catch-up. Measured times are printed (see the captured output).
PROMPTLY = 2.0


# --- the circle ----------------------------------------------------------------------------------


class Circle:
    """Five people on one relay, each paired with their two neighbours in ``CIRCLE``."""

    def __init__(self, root: Path, relay: str) -> None:
        self.root = root
        self.relay = relay
        self.people = {name: Person(root / name, relay) for name in CIRCLE}

    def __getitem__(self, name: str) -> Person:
        return self.people[name]

    def extra(self, name: str) -> Person:
        """Another home on the same relay, paired with nobody yet."""
        return Person(self.root / name, self.relay)


def _stop_daemons_under(root: Path) -> None:
    for lock in root.rglob("daemon.lock"):
        try:
            pid = int(lock.read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and pid_alive(pid):
            stop_pid(pid)


@pytest.fixture(scope="module")
def circle() -> Iterator[Circle]:
    """The module's relay and five homes paired in a circle; every process is stopped by pid."""
    root = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))  # short: unix socket paths
    relay = RelayProcess(root / "relay-data", root / "relay.stderr")
    relay.start()
    try:
        crowd = Circle(root, f"ws://127.0.0.1:{relay.port}")
        for i, name in enumerate(CIRCLE):
            pair(crowd[name], crowd[CIRCLE[(i + 1) % len(CIRCLE)]])
        yield crowd
    finally:
        _stop_daemons_under(root)
        relay.kill()
        shutil.rmtree(root, ignore_errors=True)


# --- looking at rooms ----------------------------------------------------------------------------


def op(person: Person, name: str, **params: Any) -> dict[str, Any]:
    """One control op straight to the person's (running) daemon."""
    return call(Home(person.home), name, params, timeout=30.0)


def room_view(person: Person, room: str) -> dict[str, Any] | None:
    """The person's entry for ``room`` in `room --json`, via the daemon (None if not listed)."""
    return next((r for r in op(person, "rooms")["rooms"] if r["name"] == room), None)


def cli_room(person: Person, room: str) -> dict[str, Any] | None:
    """The same, through `crosstalk room --json`."""
    return next((r for r in person.json("room")["rooms"] if r["name"] == room), None)


def roster(view: dict[str, Any] | None) -> dict[str, str]:
    """label -> state ("member" or "invited") of a room view; empty when there is no room."""
    return {m["label"]: m["state"] for m in view["members"]} if view else {}


def roster_of(person: Person, room: str) -> dict[str, str]:
    return roster(room_view(person, room))


def everyone(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    return dict.fromkeys(names, "member")


def wait_rosters(
    people: list[Person], room: str, want: dict[str, str], *, timeout: float = SETTLE
) -> None:
    """Until every one of ``people`` reads exactly ``want`` as the room's roster (bounded)."""
    seen: dict[str, dict[str, str]] = {}

    def agree() -> bool:
        for p in people:
            seen[p.home.name] = roster_of(p, room)
        return all(r == want for r in seen.values())

    try:
        wait_until(agree, timeout=timeout, what=f"every roster of #{room} to read {want}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {seen}") from None


def time_until(condition: Callable[[], bool], *, what: str, timeout: float = SETTLE) -> float:
    """Seconds until ``condition`` held, polling every 20 ms; fails after ``timeout``."""
    start = time.monotonic()
    wait_until(condition, timeout=timeout, what=what)
    return time.monotonic() - start


def wait_invitation(person: Person, room: str) -> None:
    wait_until(
        lambda: (room_view(person, room) or {}).get("pending") is True,
        timeout=SETTLE,
        what=f"{person.home.name}'s invitation to #{room}",
    )


def join(inviter: Person, invitee: Person, room: str) -> None:
    """``inviter`` invites ``invitee`` (whom they paired with); the invitee accepts."""
    invited = inviter.json("room", "invite", room, invitee.home.name)["invited"]
    assert invited == [invitee.home.name]
    wait_invitation(invitee, room)
    assert invitee.json("room", "accept", room)["room"] == room


def texts_from(messages: list[dict[str, Any]]) -> dict[str, str]:
    """text -> sender label."""
    return {m["text"]: m["from"] for m in messages}


def read_until(person: Person, *texts: str, timeout: float = SETTLE) -> list[dict[str, Any]]:
    """Read (which marks read) until every one of ``texts`` has arrived; all that was read."""
    got: list[dict[str, Any]] = []

    def arrived() -> bool:
        got.extend(person.json("read")["messages"])
        return set(texts) <= {m["text"] for m in got}

    try:
        wait_until(arrived, timeout=timeout, what=f"{texts} at {person.home.name}'s")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; read so far: {got}; log: {person.log_tail()}") from None
    return got


def send_result(person: Person, to: str, text: str) -> tuple[int, dict[str, Any]]:
    proc = person.run("send", to, text, "--json")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, (proc.returncode, proc.stdout, proc.stderr)
    return proc.returncode, json.loads(lines[-1])


# --- 1. the transcript ---------------------------------------------------------------------------


def test_a_room_of_three_agrees_on_members_and_every_change_reaches_everyone(
    circle: Circle,
) -> None:
    """The #18 transcript: rosters agree, a stranger's words arrive named, every change shows."""
    ana, ben, carl, dan, eve = (circle[n] for n in ("ana", "ben", "carl", "dan", "eve"))
    assert ana.json("room", "create", "r3")["room"] == "r3"
    join(ana, ben, "r3")
    join(ana, carl, "r3")
    trio_ = [ana, ben, carl]
    wait_rosters(trio_, "r3", everyone(["ana", "ben", "carl"]))

    # ben never paired with carl: carl is named from his signed join, marked as met through #r3.
    ben_view = cli_room(ben, "r3")
    assert ben_view is not None and ben_view["state"] == "joined", ben_view
    via = {m["label"]: m["via"] for m in ben_view["members"]}
    assert via == {"ana": None, "ben": None, "carl": "r3"}, ben_view
    carl_fp = next(m["fingerprint"] for m in ben_view["members"] if m["label"] == "carl")
    assert carl_fp != "carl" and len(carl_fp) > 8
    assert "carl (via #r3)" in ben.run("room").stdout
    ana_view = cli_room(ana, "r3")
    assert ana_view is not None
    assert {m["label"]: m["via"] for m in ana_view["members"]}["carl"] is None

    carl.json("send", "#r3", "hi")
    got = [m for m in read_until(ben, "hi") if m["text"] == "hi"]
    assert len(got) == 1 and got[0]["from"] == "carl" and got[0]["room"] == "r3", got
    assert texts_from(read_until(ana, "hi"))["hi"] == "carl"

    # carl is someone ben can name: in peers, in trust.
    peers = {p["label"]: p for p in ben.json("peers")["peers"]}
    assert "carl" in peers and peers["carl"]["fingerprint"] == carl_fp, peers
    assert ben.json("trust", "carl", "notify")["people"].get("carl") == "notify"

    # A decline shows at every member, promptly. dan is paired with ben only.
    assert ben.json("room", "invite", "r3", "dan")["invited"] == ["dan"]
    wait_invitation(dan, "r3")
    wait_rosters(trio_, "r3", {**everyone(["ana", "ben", "carl"]), "dan": "invited"})
    dan.json("room", "decline", "r3")
    took = time_until(
        lambda: all("dan" not in roster_of(p, "r3") for p in trio_),
        what="dan's decline at ana, ben and carl",
    )
    print(f"decline reached every member in {took:.3f} s")
    assert took <= PROMPTLY, f"the decline took {took:.2f} s to show everywhere"

    # A leave shows at every other member, promptly. eve is paired with carl only.
    join(carl, eve, "r3")
    four = [ana, ben, carl, eve]
    wait_rosters(four, "r3", everyone(["ana", "ben", "carl", "eve"]))
    eve.json("room", "leave", "r3")
    took = time_until(
        lambda: all("eve" not in roster_of(p, "r3") for p in trio_),
        what="eve's leave at ana, ben and carl",
    )
    print(f"leave reached every other member in {took:.3f} s")
    assert took <= PROMPTLY, f"the leave took {took:.2f} s to show everywhere"

    # ben kicks carl, by the name he knows him by.
    kicked = ben.json("room", "kick", "r3", "carl")
    assert kicked["removed"] == "carl" and kicked["epoch"] >= 1, kicked
    code, early = send_result(carl, "#r3", "sent as the kick lands")
    wait_rosters([ana, ben], "r3", everyone(["ana", "ben"]))
    wait_until(
        lambda: (room_view(carl, "r3") or {}).get("state") == "removed",
        timeout=SETTLE,
        what="carl to learn he was removed from #r3",
    )
    carl_view = cli_room(carl, "r3")
    assert carl_view is not None, "the room should still show for carl, as removed"
    assert carl_view["state"] == "removed" and carl_view["removed_by"] == "ben", carl_view
    assert "removed from #r3 by ben" in carl.run("room").stdout
    if code == 0:  # it was queued before carl knew: it must end refused, with a reason
        wait_until(
            lambda: any(
                m["id"] == early["id"] and m["state"] == "refused" and m.get("reason")
                for m in carl.json("sent")["sent"]
            ),
            timeout=SETTLE,
            what="carl's message sent into the kick to end refused with a reason",
        )
    else:
        assert early["error"]["code"] == "not_a_member", early
    code, late = send_result(carl, "#r3", "sent after the kick")
    assert code == 1 and late["error"]["code"] == "not_a_member", late

    ana.json("send", "#r3", "carl is gone")
    read_until(ben, "carl is gone")
    heard = [m["text"] for p in (ana, ben) for m in p.json("read", "--all")["messages"]]
    assert "sent as the kick lands" not in heard and "sent after the kick" not in heard
    assert "carl is gone" not in [m["text"] for m in carl.json("read", "--all")["messages"]]


def test_kick_in_a_room_of_two_is_refused_and_changes_nothing(circle: Circle) -> None:
    """`room kick` on a room of two exits 1 with direct_room; both sides stay paired."""
    fay, gus = circle.extra("fay"), circle.extra("gus")
    pair(fay, gus)
    error = fay.json("room", "kick", "gus", "gus", expect=1)["error"]
    assert error["code"] == "direct_room", error
    for me, other in ((fay, gus), (gus, fay)):
        view = cli_room(me, other.home.name)
        assert view is not None and view["kind"] == "direct", view
        assert roster(view) == everyone([me.home.name, other.home.name]), view
    fay.json("send", "gus", "still here")
    assert texts_from(read_until(gus, "still here"))["still here"] == "fay"


# --- 2. five claimants ---------------------------------------------------------------------------


def _seed() -> int:
    given = os.environ.get("CROSSTALK_ROOMS_SEED")
    return int(given) if given else random.SystemRandom().randrange(2**32)


def _join_in_random_order(circle: Circle, rng: random.Random, room: str) -> list[str]:
    """Create ``room`` at a random person; invitations (each by a member paired with the
    invitee) and acceptances interleave at random. Returns what happened, for failure messages."""
    n = len(CIRCLE)
    creator = rng.randrange(n)
    circle[CIRCLE[creator]].json("room", "create", room)
    joined, invited = {creator}, list[int]()
    story = [f"{CIRCLE[creator]} creates"]
    while len(joined) < n:
        can_invite = [
            (who, by)
            for who in range(n)
            if who not in joined and who not in invited
            for by in ((who - 1) % n, (who + 1) % n)
            if by in joined
        ]
        if can_invite and (not invited or rng.random() < 0.5):
            who, by = rng.choice(can_invite)
            circle[CIRCLE[by]].json("room", "invite", room, CIRCLE[who])
            invited.append(who)
            story.append(f"{CIRCLE[by]} invites {CIRCLE[who]}")
        else:
            who = invited.pop(rng.randrange(len(invited)))
            wait_invitation(circle[CIRCLE[who]], room)
            circle[CIRCLE[who]].json("room", "accept", room)
            joined.add(who)
            story.append(f"{CIRCLE[who]} accepts")
    return story


def test_five_claim_one_task_at_once_and_exactly_one_wins_ten_times(circle: Circle) -> None:
    """Five members joined in a random order; ten rounds of five simultaneous claims, one winner."""
    seed = _seed()
    print(f"seed {seed} (replay: CROSSTALK_ROOMS_SEED={seed})")
    try:
        _five_claimants(circle, random.Random(seed))
    except BaseException as exc:
        exc.add_note(f"seed {seed}; replay with CROSSTALK_ROOMS_SEED={seed}")
        raise


def _five_claimants(circle: Circle, rng: random.Random) -> None:
    room = "claims"
    crowd = [circle[n] for n in CIRCLE]
    story = _join_in_random_order(circle, rng, room)
    print("join order:", "; ".join(story))
    wait_rosters(crowd, room, everyone(CIRCLE))

    def holders(task_id: str) -> dict[str, tuple[str, str | None]]:
        views: dict[str, tuple[str, str | None]] = {}
        for p in crowd:
            task = next((t for t in op(p, "tasks", room=room)["tasks"] if t["id"] == task_id), None)
            views[p.home.name] = (task["state"], task["claimed_by"]) if task else ("absent", None)
        return views

    won_by: dict[str, str] = {}
    for rnd in range(10):
        adder = rng.choice(crowd)
        task_id = adder.json("tasks", "add", f"round {rnd}", "--room", room)["id"]
        wait_until(
            lambda task_id=task_id: all(v[0] == "open" for v in holders(task_id).values()),
            timeout=SETTLE,
            what=f"round {rnd}'s task at every member",
        )
        claimants = rng.sample(crowd, len(crowd))
        procs = [p.spawn("tasks", "claim", task_id, "--room", room, "--json") for p in claimants]
        answers: dict[str, dict[str, Any]] = {}
        for p, proc in zip(claimants, procs, strict=True):
            out, err = proc.communicate(timeout=120)
            reply = json.loads(out.splitlines()[-1])
            if "error" in reply:  # a lost claim exits 1, claimed_by_other naming the holder
                assert proc.returncode == 1, (p.home.name, out, err)
                assert reply["error"]["code"] == "claimed_by_other", (p.home.name, out)
                holder = reply["error"]["message"].partition(" has ")[0]
                reply = {"outcome": "lost", "claimed_by": holder}
            else:
                assert proc.returncode == 0, (p.home.name, out, err)
            answers[p.home.name] = reply
        outcomes = {name: a["outcome"] for name, a in answers.items()}
        winners = [name for name, outcome in outcomes.items() if outcome == "won"]
        assert len(winners) == 1, f"round {rnd}: outcomes {outcomes}"
        assert sorted(outcomes.values()) == ["lost"] * 4 + ["won"], f"round {rnd}: {outcomes}"
        (winner,) = winners
        told = {name: a["claimed_by"] for name, a in answers.items() if name != winner}
        assert set(told.values()) == {winner}, f"round {rnd}: {winner} won; losers told {told}"
        seen: dict[str, tuple[str, str | None]] = {}

        def agreed(
            task_id: str = task_id, seen: dict[str, Any] = seen, winner: str = winner
        ) -> bool:
            seen.update(holders(task_id))
            return set(seen.values()) == {("claimed", winner)}

        try:
            wait_until(agreed, timeout=SETTLE, what=f"round {rnd}: every replica to name {winner}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; replicas: {seen}") from None
        won_by[task_id] = winner
    print("winners:", list(won_by.values()))
    for p in crowd:  # and the same through the CLI, everyone, every round
        view = {t["id"]: t["claimed_by"] for t in p.json("tasks", "--room", room)["tasks"]}
        assert {i: view.get(i) for i in won_by} == won_by, (p.home.name, view)


# --- 3. a member who was away --------------------------------------------------------------------


def test_a_member_away_while_two_join_and_one_leaves_catches_up_on_return(
    circle: Circle,
) -> None:
    """ben's daemon is stopped while eve and dan join and carl leaves: he gets it all back."""
    ana, ben, carl, dan, eve = (circle[n] for n in ("ana", "ben", "carl", "dan", "eve"))
    room = "away"
    ana.json("room", "create", room)
    join(ana, ben, room)
    join(ana, carl, room)
    wait_rosters([ana, ben, carl], room, everyone(["ana", "ben", "carl"]))
    ana.json("send", f"#{room}", "before ben went")
    read_until(ben, "before ben went")

    assert ben.json("daemon", "stop")["stopped"] is True
    try:
        join(carl, eve, room)  # eve: paired with carl and dan, never with ben
        ana.json("send", f"#{room}", "m1 from ana")
        eve.json("send", f"#{room}", "m2 from eve")
        join(eve, dan, room)  # dan: paired with ben and eve
        dan.json("send", f"#{room}", "m3 from dan")
        carl.json("send", f"#{room}", "m4 from carl")
        # carl leaves only once his message is out (a leave takes the room off his machine).
        heard: dict[str, str] = {}

        def ana_heard_all() -> bool:
            heard.update(texts_from(ana.json("read")["messages"]))
            return {"m2 from eve", "m3 from dan", "m4 from carl"} <= set(heard)

        wait_until(ana_heard_all, timeout=SETTLE, what="ana to hear m2, m3 and m4")
        carl.json("room", "leave", room)
        ana.json("send", f"#{room}", "m5 after carl left")
        online = [ana, dan, eve]
        wait_rosters(online, room, everyone(["ana", "ben", "dan", "eve"]))
    finally:
        started = ben.json("daemon", "start")
    assert started.get("pid"), started

    expected = {
        "m1 from ana": "ana",
        "m2 from eve": "eve",
        "m3 from dan": "dan",
        "m4 from carl": "carl",
        "m5 after carl left": "ana",
    }
    got = [m for m in read_until(ben, *expected, timeout=60) if m["room"] == room]
    assert texts_from(got) == expected, got
    assert len(got) == len(expected), f"a message arrived twice: {got}"
    wait_rosters([ben], room, everyone(["ana", "ben", "dan", "eve"]))
    view = cli_room(ben, room)
    assert view is not None and view["state"] == "joined", view
    assert roster(view) == everyone(["ana", "ben", "dan", "eve"]), view
    via = {m["label"]: m["via"] for m in view["members"]}
    assert via == {"ana": None, "ben": None, "dan": None, "eve": room}, view
    for p in (ana, dan, eve):
        assert roster(cli_room(p, room)) == everyone(["ana", "ben", "dan", "eve"]), p.home.name
    ben.json("send", f"#{room}", "back")
    for p in (ana, dan, eve):
        assert texts_from(read_until(p, "back"))["back"] == "ben", p.home.name
