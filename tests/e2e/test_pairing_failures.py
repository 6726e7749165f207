"""Pairing that must fail: wrong words, a guessing third party, bad codes. Nothing is adopted."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.core.invite import Invite
from crosstalk.core.words import WORDS
from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from crosstalk.wire.pairing import Purpose
from tests.e2e.conftest import Person, read_json_line


def _other_word(word: str) -> str:
    return next(w for w in WORDS if w != word)


def _wrong(code: str) -> str:
    invite = Invite.parse(code, purpose=Purpose.ROOM)
    words = (*invite.words[:3], _other_word(invite.words[3]))
    return Invite(invite.slot, words).format()


def _finish(proc) -> dict[str, object]:  # type: ignore[no-untyped-def]
    line = read_json_line(proc, timeout=60)
    proc.wait(timeout=30)
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    return line


def test_wrong_words_fail_on_both_sides_and_burn_the_slot(people: list[Person]) -> None:
    """Wrong words: both sides say wrong_words, neither adopts anything, the code is spent."""
    ana, ben, _ = people
    new = ana.spawn("room", "new", "--json")
    code = read_json_line(new, timeout=60)["invite"]
    joined = ben.json("room", "join", _wrong(code), expect=1)
    assert joined["error"]["code"] == "wrong_words"
    assert _finish(new)["error"]["code"] == "wrong_words"
    assert new.returncode == 1
    retry = ben.json("room", "join", code, expect=1)
    assert retry["error"]["code"] in {"slot_not_found", "slot_expired"}
    for person in (ana, ben):
        assert person.json("send", "x", "hello", expect=1)["error"]["code"] == "unknown_peer"


def test_third_party_guessing_burns_the_slot(people: list[Person]) -> None:
    """Someone with the slot but not the words cannot pair, and the real joiner is then refused."""
    ana, ben, cy = people
    new = ana.spawn("room", "new", "--json")
    code = read_json_line(new, timeout=60)["invite"]
    slot = code.split("-")[0]
    guess = f"{slot}-{'-'.join(WORDS[:4])}"
    if guess == code:
        guess = f"{slot}-{'-'.join(WORDS[4:8])}"
    assert cy.json("room", "join", guess, expect=1)["error"]["code"] == "wrong_words"
    assert _finish(new)["error"]["code"] == "wrong_words"
    assert ben.json("room", "join", code, expect=1)["error"]["code"] in {
        "slot_not_found",
        "slot_expired",
    }


def test_unknown_slot_is_slot_not_found(people: list[Person]) -> None:
    """A well-formed code for a slot nobody opened: slot_not_found."""
    ana, _, _ = people
    error = ana.json("room", "join", f"0000-{'-'.join(WORDS[:4])}", expect=1)["error"]
    assert error["code"] == "slot_not_found"


def test_malformed_code_is_a_usage_error_naming_the_form(people: list[Person]) -> None:
    """A code that is not `NNNN-word-word-word-word` exits 2 and says the expected form."""
    ana, _, _ = people
    proc = ana.run("room", "join", "12-not-a-code", "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)["error"]
    assert error["code"] == "usage" and "NNNN-word-word-word-word" in error["message"]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    code=st.text(max_size=60)
    | st.builds(
        lambda slot, words: f"{slot:04d}-" + "-".join(words),
        st.integers(0, 9999),
        st.lists(st.sampled_from(WORDS), min_size=4, max_size=4),
    )
)
def test_fuzzed_invite_codes_never_crash(people: list[Person], code: str) -> None:
    """Any text as a code: a usage error or slot_not_found, and the daemon keeps answering."""
    ana, _, _ = people
    sock = ana.home / "daemon.sock"
    if not sock.exists():
        ana.json("daemon", "start")
    try:
        control.request(sock, "room_join", {"code": code}, timeout=30)
        raise AssertionError("a fuzzed code paired with nobody")
    except CrosstalkError as exc:
        assert exc.code in {"usage", "slot_not_found", "slot_expired", "rate_limited"}, exc
    assert control.request(sock, "status", timeout=10)["ok"] is True
