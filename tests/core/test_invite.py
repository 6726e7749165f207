"""Invite codes: formatting, strict parsing, and fuzzing that only ever yields UsageError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.invite import Invite, expected_form
from crosstalk.core.words import WORDS
from crosstalk.errors import UsageError
from crosstalk.wire.pairing import Purpose

ROOM = Purpose.ROOM
LINK = Purpose.LINK
FOUR = ("acorn", "apple", "bat", "cow")


def test_a_room_code_parses_into_slot_and_four_words() -> None:
    """The plain form gives the slot and the words, with no address."""
    invite = Invite.parse("0042-acorn-apple-bat-cow", purpose=ROOM)
    assert invite == Invite(slot="0042", words=FOUR)
    assert invite.host is None and invite.port is None


@pytest.mark.parametrize(
    "text",
    [
        "0042-ACORN-Apple-bat-cow",
        "  0042-acorn-apple-bat-cow\n",
        "0042 acorn apple bat cow",
        "0042 - acorn - apple - bat - cow",
        "0042-acorn--apple-bat-cow",
        "\t0042-acorn apple-bat\tcow ",
    ],
    ids=["case", "surrounding-space", "spaces", "spaced-dashes", "double-dash", "mixed"],
)
def test_parsing_ignores_case_and_tolerates_whitespace(text: str) -> None:
    """Case, surrounding whitespace, and spaces or dashes between parts do not matter."""
    assert Invite.parse(text, purpose=ROOM) == Invite(slot="0042", words=FOUR)


def test_the_host_form_carries_the_lan_address() -> None:
    """``… at 192.168.1.5:8787`` gives host and port, and formats back the same way."""
    text = "1234-acorn-apple-bat-cow at 192.168.1.5:8787"
    invite = Invite.parse(text, purpose=ROOM)
    assert (invite.host, invite.port) == ("192.168.1.5", 8787)
    assert invite.format() == text


def test_the_host_form_accepts_names_and_bracketed_ipv6() -> None:
    """A DNS name (lowercased) and a bracketed IPv6 address are valid hosts."""
    named = Invite.parse("1234-acorn-apple-bat-cow AT Laptop.Local:8787", purpose=ROOM)
    assert (named.host, named.port) == ("laptop.local", 8787)
    v6 = Invite.parse("1234-acorn-apple-bat-cow at [fd00::5]:80", purpose=ROOM)
    assert (v6.host, v6.port) == ("[fd00::5]", 80)


def test_a_link_code_has_six_words() -> None:
    """``link`` codes carry six words; four are not enough."""
    six = (*FOUR, "crow", "dog")
    assert Invite.parse("1234-" + "-".join(six), purpose=LINK).words == six
    with pytest.raises(UsageError, match="NNNN-word-word-word-word-word-word"):
        Invite.parse("1234-acorn-apple-bat-cow", purpose=LINK)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "4-digit slot"),
        ("123-acorn-apple-bat-cow", "4-digit slot"),
        ("12345-acorn-apple-bat-cow", "4-digit slot"),
        ("١٢٣٤-acorn-apple-bat-cow", "4-digit slot"),
        ("acorn-apple-bat-cow", "4-digit slot"),
        ("1234-acorn-apple-bat", "3 words, not 4"),
        ("1234-acorn-apple-bat-cow-dog", "5 words, not 4"),
        ("1234-acorn-apple-bat-xylophone", "'xylophone' is not one of crosstalk's words"),
        ("1234-acorn-apple-bat-cow at", "5 words"),
        ("1234-acorn-apple-bat-cow at host", "host:port"),
        ("1234-acorn-apple-bat-cow at host:0", "host:port"),
        ("1234-acorn-apple-bat-cow at host:65536", "host:port"),
        ("1234-acorn-apple-bat-cow at a b:1", "host:port"),
        ("1234-" + "acorn-" * 100, "far too long"),
    ],
)
def test_malformed_codes_raise_usage_error_naming_the_expected_form(
    text: str, problem: str
) -> None:
    """Every malformed code raises UsageError saying what is wrong and showing the form."""
    with pytest.raises(UsageError) as caught:
        Invite.parse(text, purpose=ROOM)
    assert problem in caught.value.message
    assert "NNNN-word-word-word-word" in caught.value.message
    assert caught.value.code == "usage"


def test_new_invites_take_their_words_from_the_entropy_given() -> None:
    """Invite.new picks the purpose's number of words from the caller's random bytes."""
    room = Invite.new("0001", bytes(8), purpose=ROOM, host="10.0.0.2", port=8787)
    assert room.words == (WORDS[0],) * 4
    assert room.format() == f"0001-{'-'.join(room.words)} at 10.0.0.2:8787"
    link = Invite.new("0001", b"\x00\x01" * 6, purpose=LINK)
    assert link.words == (WORDS[1],) * 6


def test_expected_form_names_one_word_per_slot() -> None:
    """The form shown to people has as many ``word`` parts as the purpose needs."""
    assert expected_form(ROOM) == "NNNN-word-word-word-word"
    assert expected_form(LINK) == "NNNN-word-word-word-word-word-word"


@pytest.mark.parametrize(
    "arguments",
    [
        {"slot": "12", "words": FOUR},
        {"slot": "1234", "words": FOUR[:3]},
        {"slot": "1234", "words": (*FOUR[:3], "nope")},
        {"slot": "1234", "words": FOUR, "host": "h", "port": None},
        {"slot": "1234", "words": FOUR, "host": "h", "port": 70000},
        {"slot": "1234", "words": FOUR, "host": "Bad Host", "port": 1},
    ],
    ids=["slot", "count", "unknown-word", "host-without-port", "port-range", "host-shape"],
)
def test_invite_refuses_to_be_built_malformed(arguments: dict[str, object]) -> None:
    """An Invite value is always well-formed, so format() always parses back."""
    with pytest.raises(ValueError):
        Invite(**arguments)  # type: ignore[arg-type]  # deliberately malformed keyword sets


# --- property tests ---------------------------------------------------------------------------

hosts = st.one_of(
    st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
)


@st.composite
def invites(draw: st.DrawFn) -> tuple[Purpose, Invite]:
    purpose = draw(st.sampled_from(Purpose))
    words = draw(
        st.lists(st.sampled_from(WORDS), min_size=purpose.word_count, max_size=purpose.word_count)
    )
    slot = draw(st.from_regex(r"[0-9]{4}", fullmatch=True))
    address = draw(st.none() | st.tuples(hosts, st.integers(1, 65535)))
    host, port = address if address is not None else (None, None)
    return purpose, Invite(slot=slot, words=tuple(words), host=host, port=port)


@given(invites())
def test_format_then_parse_round_trips(case: tuple[Purpose, Invite]) -> None:
    """Any well-formed invite survives format() then parse() unchanged."""
    purpose, invite = case
    assert Invite.parse(invite.format(), purpose=purpose) == invite


@given(invites(), st.sampled_from([" ", "  ", "\t", " - "]), st.booleans())
def test_round_trip_survives_retyping(
    case: tuple[Purpose, Invite], separator: str, shout: bool
) -> None:
    """The same code typed with other separators and in capitals parses to the same invite."""
    purpose, invite = case
    code = separator.join((invite.slot, *invite.words))
    if invite.host is not None:
        code += f" at {invite.host}:{invite.port}"
    typed = f"  {code.upper() if shout else code} "
    assert Invite.parse(typed, purpose=purpose) == invite


@given(st.text(max_size=400), st.sampled_from(Purpose))
def test_arbitrary_text_only_ever_raises_usage_error(text: str, purpose: Purpose) -> None:
    """Whatever is typed, parse() returns an Invite or raises UsageError, nothing else."""
    try:
        invite = Invite.parse(text, purpose=purpose)
    except UsageError as exc:
        assert expected_form(purpose) in exc.message
    else:
        assert len(invite.words) == purpose.word_count


@given(
    st.lists(
        st.one_of(
            st.sampled_from(WORDS),
            st.from_regex(r"[0-9]{1,6}", fullmatch=True),
            st.sampled_from(["at", "-", " ", ":", "1.2.3.4:5"]),
        ),
        max_size=12,
    ),
    st.sampled_from(Purpose),
)
def test_near_miss_codes_only_ever_raise_usage_error(parts: list[str], purpose: Purpose) -> None:
    """Codes assembled from plausible pieces raise UsageError or parse to a valid invite."""
    try:
        invite = Invite.parse(" ".join(parts), purpose=purpose)
    except UsageError:
        return
    assert Invite.parse(invite.format(), purpose=purpose) == invite
