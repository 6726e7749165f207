"""What the human CLI prints of peers' words shows control characters instead of obeying them."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.cli.output import Output, visible
from crosstalk.errors import UnknownPeer

ATTACKS = {
    "window title": "\x1b]0;pwned\x07",
    "clear screen": "\x1b[2J\x1b[H",
    "overwrite the sender line": "\x1b[1A\x1b[2Kben · message · fyi",
    "clipboard write": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07",
    "C1 CSI": "\x9b2J",
    "carriage return": "ana\rben",
    "bidi override": "\u202eana",
}


def _obeyable(char: str) -> bool:
    """Whether a terminal might act on ``char`` rather than show it (the test's own definition,
    written apart from the table it checks)."""
    code = ord(char)
    if char in "\n\t":
        return False
    if code < 0x20 or 0x7F <= code < 0xA0:
        return True
    return unicodedata.category(char) == "Cs" or char in "\u2028\u2029" or (
        0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069
    )


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_nothing_a_terminal_obeys_survives_and_the_rest_is_untouched(text: str) -> None:
    """Any text: nothing obeyable survives, it encodes as UTF-8, and clean text is unchanged."""
    shown = visible(text)
    assert not any(_obeyable(c) for c in shown)
    shown.encode("utf-8")  # a lone surrogate would raise here, and on a real stdout
    if not any(_obeyable(c) for c in text):
        assert shown == text


@given(st.integers(min_value=0, max_value=0x10FFFF).map(chr))
def test_each_obeyable_character_reads_as_its_python_escape(char: str) -> None:
    """Every obeyable code point, alone, becomes ``\\xNN`` (below 256) or ``\\uNNNN``."""
    if not _obeyable(char):
        assert visible(char) == char
        return
    code = ord(char)
    assert visible(char) == (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


@pytest.mark.parametrize("attack", list(ATTACKS.values()), ids=list(ATTACKS))
def test_human_output_and_error_sentences_show_the_escapes(
    attack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Output.emit`` and ``Output.report`` (human form) write no raw control character."""
    out = Output(json_mode=False)
    out.emit({}, f"ana: {attack}\n\tsecond line")
    assert out.report(UnknownPeer(f"No contact named {attack}.")) == 1
    written = capsys.readouterr()
    for stream in (written.out, written.err):
        assert not any(_obeyable(c) for c in stream), repr(stream)
    assert "\n\tsecond line" in written.out  # newline and tab stay what they are
    assert visible(attack) in written.out and visible(attack) in written.err


def test_esc_reads_as_backslash_x1b() -> None:
    """The convention, pinned: ESC is shown as the four characters ``\\x1b``."""
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"


def test_one_line_also_shows_newline_and_tab() -> None:
    """For a name inside a line: newline and tab read ``\\x0a`` and ``\\x09``, the rest as ever."""
    assert visible("a\nb\tc\x1b", one_line=True) == "a\\x0ab\\x09c\\x1b"
    assert visible("a\nb\tc\x1b") == "a\nb\tc\\x1b"


def test_a_new_roommates_label_stays_on_the_joined_line() -> None:
    """`room new`/`join` name the peer by the label they chose: it cannot add lines of its own."""
    from crosstalk.cli.cmd_room import _joined_text

    text = _joined_text({"joined": "ana\n\n  them  0000-0000\x1b[1A", "them": "1111", "you": "2"})
    assert text.split("\n")[:3] == ["Now in a room with ana\\x0a\\x0a  them  0000-0000\\x1b[1A.",
                                    "", "  them  1111"]
