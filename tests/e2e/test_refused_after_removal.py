"""A message queued for a room we were removed from ends ``refused``, with the relay's reason,
in ``sent --json`` (issue 19 item 5), end to end with real daemons and a real relay.

cy's daemon is kept away from the relay (a dead relay address) while ana removes her, so cy
still believes she is a member and her send is queued; once her daemon reaches the relay again
the relay refuses the post, and ``sent`` must say so and why, never ``queued`` for ever.
"""

from __future__ import annotations

from tests.e2e.conftest import Person, pair, wait_until
from tests.e2e.test_rooms_many import everyone, join, wait_rosters

DEAD_RELAY = "ws://127.0.0.1:1"  # nothing listens on port 1: every connect is refused


def test_a_message_queued_for_a_room_we_were_removed_from_ends_refused_with_reason(
    people: list[Person],
) -> None:
    """Queued while cut off, refused once connected: sent --json shows refused and a reason."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ana, cy)
    ana.json("room", "create", "r3")
    join(ana, ben, "r3")
    join(ana, cy, "r3")
    wait_rosters([ana, ben, cy], "r3", everyone(["ana", "ben", "cy"]))
    cy.json("daemon", "stop")
    ana.json("room", "kick", "r3", "cy")
    wait_rosters([ana, ben], "r3", everyone(["ana", "ben"]))
    cut_off = {"CROSSTALK_RELAY": DEAD_RELAY}
    queued = cy.json("send", "#r3", "sent while cut off", env=cut_off)
    assert queued["state"] == "queued"
    cy.json("daemon", "stop", env=cut_off)
    found: dict[str, object] = {}

    def refused() -> bool:
        reply = cy.json("sent")
        (row,) = [m for m in reply["messages"] if m["id"] == queued["id"]]
        found.update(row)
        return row["state"] == "refused"

    wait_until(refused, timeout=60, what="cy's queued message to end refused")
    assert found["reason"], found
    assert "sent while cut off" not in [m["text"] for m in ben.json("read", "--all")["messages"]]
