"""Inviting someone met in a room (issue 39, Build 5), end to end: a real relay, a daemon per
home, the real CLI.

ana paired with ben and with cy; ben and cy never paired. Once all three are in #team, cy can
invite ben to the next room: his keys come from #team's verified history, the invitation goes
through #team, and ben sees who invited him and through which room.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Person, pair
from tests.e2e.test_rooms_many import (
    cli_room,
    everyone,
    join,
    read_until,
    texts_from,
    wait_invitation,
    wait_rosters,
)

pytestmark = pytest.mark.e2e


def test_accepting_or_declining_without_an_invitation_is_not_invited(
    people: list[Person],
) -> None:
    """`room accept` / `room decline` of a room nobody invited us to: not_invited, exit 1."""
    ana, ben, _ = people
    pair(ana, ben)
    for verb in ("accept", "decline"):
        error = ben.json("room", verb, "nosuch", expect=1)["error"]
        assert error["code"] == "not_invited", error
        assert "nosuch" in error["message"]


def test_someone_met_in_a_room_can_be_invited_to_the_next_and_they_talk(
    people: list[Person],
) -> None:
    """cy invites ben, whom he never paired with but shares #team with; ben sees the invitation
    from cy via #team, accepts, and the two talk in #next."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ana, cy)
    assert ana.json("room", "create", "team")["room"] == "team"
    join(ana, ben, "team")
    join(ana, cy, "team")
    wait_rosters([ana, ben, cy], "team", everyone(["ana", "ben", "cy"]))

    assert cy.json("room", "create", "next")["room"] == "next"
    assert cy.json("room", "invite", "next", "ben")["invited"] == ["ben"]
    wait_invitation(ben, "next")
    view = cli_room(ben, "next")
    assert view is not None and view["pending"] is True, view
    assert (view["invited_by"], view["invited_via"]) == ("cy", "team"), view
    assert "invitation from cy via #team" in ben.run("room").stdout

    assert ben.json("room", "accept", "next")["room"] == "next"
    wait_rosters([ben, cy], "next", everyone(["ben", "cy"]))
    cy.json("send", "#next", "welcome to next")
    assert texts_from(read_until(ben, "welcome to next"))["welcome to next"] == "cy"
    ben.json("send", "#next", "glad to be here")
    assert texts_from(read_until(cy, "glad to be here"))["glad to be here"] == "ben"
