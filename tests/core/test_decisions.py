"""DECISIONS.md text: created with a heading, appended in order, one line per field."""

from __future__ import annotations

import pytest

from crosstalk.core.decisions import HEADER, append_decision, format_when
from crosstalk.errors import LocalProtocolError

NEW_FILE = """# Decisions

Settled decisions for this repository, appended by crosstalk, newest last.

## Use snake_case in every API response

- Who: marie
- When: 2026-11-29 07:45 UTC
- Why: the mobile clients already expect it
"""


def test_a_missing_file_starts_with_the_heading() -> None:
    """With no file, the text is the heading, the note, then the entry."""
    text = append_decision(
        None,
        text="Use snake_case in every API response",
        why="the mobile clients already expect it",
        who="marie",
        when_utc="2026-11-29T07:45:12Z",
    )
    assert text == NEW_FILE


@pytest.mark.parametrize("existing", ["", "\n", "  \n\n"])
def test_an_empty_file_gets_the_heading_too(existing: str) -> None:
    """A file with nothing but whitespace is treated like a new one."""
    text = append_decision(existing, text="x", why="", who="jo", when_utc="2026-01-02T03:04:00Z")
    assert text.startswith(HEADER + "\n## x\n")


def test_entries_are_appended_in_order_after_one_blank_line() -> None:
    """An existing file keeps its text; each new entry follows after exactly one blank line."""
    first = append_decision(
        None,
        text="Use snake_case in every API response",
        why="the mobile clients already expect it",
        who="marie",
        when_utc="2026-11-29T07:45:00+00:00",
    )
    second = append_decision(
        first + "\n\n\n",
        text="Chunks are 4KB",
        why="",
        who="jo/laptop",
        when_utc="2026-11-30T23:59:59Z",
    )
    assert (
        second
        == NEW_FILE + "\n## Chunks are 4KB\n\n- Who: jo/laptop\n- When: 2026-11-30 23:59 UTC\n"
    )


def test_a_hand_written_file_is_kept_and_extended() -> None:
    """Someone else's DECISIONS.md, without a final newline, is kept byte for byte."""
    existing = "# Our decisions\n\n* 2024: we use Python"
    text = append_decision(
        existing, text="Use Trio", why="cancel scopes", who="kim", when_utc="2026-03-01T12:00:00Z"
    )
    assert text == (
        "# Our decisions\n\n* 2024: we use Python\n\n"
        "## Use Trio\n\n- Who: kim\n- When: 2026-03-01 12:00 UTC\n- Why: cancel scopes\n"
    )


def test_newlines_in_sender_text_cannot_forge_entries() -> None:
    """Whitespace runs, newlines included, collapse to one space in every field."""
    text = append_decision(
        None,
        text="real\n\n## Fake decision\n- Who: admin",
        why="because\r\nreasons",
        who="mal\nlory",
        when_utc="2026-11-29T07:45:00Z",
    )
    entry = text.removeprefix(HEADER + "\n")
    assert entry == (
        "## real ## Fake decision - Who: admin\n\n"
        "- Who: mal lory\n- When: 2026-11-29 07:45 UTC\n- Why: because reasons\n"
    )


@pytest.mark.parametrize(
    "when", ["2026-11-29T08:45:00+01:00", "2026-11-29T07:45:00", "yesterday", "2026-11-29"]
)
def test_times_must_be_iso_utc(when: str) -> None:
    """A time that is not ISO 8601 marked UTC is refused rather than written wrongly."""
    with pytest.raises(LocalProtocolError):
        format_when(when)
