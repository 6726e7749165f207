"""Two people pair with four words through a real relay, and a message crosses both ways."""

from __future__ import annotations

from tests.e2e.conftest import Person, pair, wait_for_messages


def test_pairing_fingerprints_cross_and_messages_cross_both_ways(people: list[Person]) -> None:
    """Each side's `them` is the other's `you`; a message goes each way and is read once."""
    ana, ben, _ = people
    ana_side, ben_side = pair(ana, ben)
    assert ana_side["them"] == ben_side["you"]
    assert ben_side["them"] == ana_side["you"]
    assert ana_side["joined"] == "ben" and ben_side["joined"] == "ana"
    assert ana_side["room"] == ben_side["room"]

    sent = ana.json("send", "ben", "the migration landed", "--intent", "blocking")
    assert sent["to"] == ["ben"] and sent["state"] in {"queued", "sent"}
    reply = ben.json("send", "ana", "thanks, rebasing now")
    assert reply["to"] == ["ana"]

    got = {"ben": wait_for_messages(ben, 1), "ana": wait_for_messages(ana, 1)}
    (to_ben,) = got["ben"]
    assert to_ben["text"] == "the migration landed"
    assert to_ben["from"] == "ana" and to_ben["intent"] == "blocking"
    (to_ana,) = got["ana"]
    assert to_ana["text"] == "thanks, rebasing now" and to_ana["from"] == "ben"
    assert ben.json("read")["messages"] == []  # read once
    assert len(ben.json("read", "--all")["messages"]) == 1
