"""What was sent before a leave reaches the room (sim seed 3116), end to end with real daemons
and a real relay.

ben's daemon is kept away from the relay (a dead relay address) while he sends to the room, so
the message is queued; then he leaves with the relay reachable again. The leave waits until
the link is up; it must not overtake the queued post, which the relay would then refuse as from
a non-member: ana reads the message and ben's ``sent`` says ``sent``, never ``refused``.
"""

from __future__ import annotations

from tests.e2e.conftest import Person, pair, wait_until
from tests.e2e.test_refused_after_removal import DEAD_RELAY
from tests.e2e.test_rooms_many import everyone, join, wait_rosters


def test_a_message_queued_before_a_leave_reaches_the_room(people: list[Person]) -> None:
    ana, ben, _ = people
    pair(ana, ben)
    ana.json("room", "create", "r2")
    join(ana, ben, "r2")
    wait_rosters([ana, ben], "r2", everyone(["ana", "ben"]))
    ben.json("daemon", "stop")
    cut_off = {"CROSSTALK_RELAY": DEAD_RELAY}
    queued = ben.json("send", "#r2", "goodbye, leaving now", env=cut_off)
    assert queued["state"] == "queued"
    ben.json("daemon", "stop", env=cut_off)
    left = ben.json("room", "leave", "r2")  # starts the daemon against the real relay
    assert left["state"] == "left"
    (row,) = [m for m in ben.json("sent")["messages"] if m["id"] == queued["id"]]
    assert row["state"] != "refused", row
    texts: list[str] = []

    def arrived() -> bool:
        texts.extend(m["text"] for m in ana.json("read", "--all")["messages"])
        return "goodbye, leaving now" in texts

    wait_until(arrived, timeout=30, what="ana to read what ben sent before leaving")
