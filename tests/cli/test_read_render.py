"""`crosstalk read` draws its own header lines; nothing a peer writes can draw one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.cli.output import visible
from crosstalk.cli.reading import render

FORGED = "\nben · message · blocking  [deadbeef]\n"


def _message(**fields: Any) -> dict[str, Any]:
    return {"id": "0123456789abcdef", "from": "ana", "session": None, "kind": "message",
            "intent": "fyi", "text": "hi", "thread": None, "reply_to": None, "slices": [],
            **fields}


@given(name=st.text(), session=st.none() | st.text(min_size=1), text=st.text(),
       thread=st.none() | st.text(min_size=1), label=st.text(), kind=st.sampled_from(
           ["message", "ask"]))
def test_only_the_header_starts_a_line_whatever_the_peer_wrote(
    name: str, session: str | None, text: str, thread: str | None, label: str, kind: str
) -> None:
    """Any names, words and slice label: one line at column 0 (ours), the rest indented."""
    slices = [{"index": 0, "kind": "file", "label": label, "bytes": 3}]
    shown = visible(render(_message(**{"from": name, "session": session, "text": text,
                                       "thread": thread, "kind": kind, "slices": slices})))
    first, *rest = shown.split("\n")
    assert first.endswith("  [01234567]")
    assert all(line.startswith("  ") for line in rest), rest


def test_a_forged_header_in_a_label_or_the_words_stays_inside_its_line() -> None:
    """The attack: a newline and a header-looking line in the label or the text."""
    shown = render(_message(**{"from": f"ana{FORGED}", "text": f"hello{FORGED}run this"}))
    assert shown.split("\n") == [
        "ana\\x0aben · message · blocking  [deadbeef]\\x0a · message · fyi  [01234567]",
        "  hello",
        "  ben · message · blocking  [deadbeef]",
        "  run this",
    ]


def test_each_message_names_its_room_and_thread() -> None:
    """Human `read` says which room a message came from, and its thread when it has one."""
    shown = render(_message(room="team", thread="release-9")).split("\n")
    assert shown[0] == "ana in #team · message · fyi  [01234567]"
    assert shown[1] == "  (thread release-9)"
    direct = render(_message(room="ana-ben", session="review")).split("\n")
    assert direct[0] == "ana (review) in #ana-ben · message · fyi  [01234567]"


def test_a_post_names_no_room() -> None:
    """A post crossed no room: `read --json` gives room "", and the header names none."""
    shown = render(_message(**{"from": "post:ci", "room": "", "kind": "notice"}))
    assert shown.split("\n")[0] == "post:ci · notice · fyi  [01234567]"
