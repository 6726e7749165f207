"""Cursor drops context over 10,000 characters, so the dialect cuts and says how much."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.dialects import dialect_for
from crosstalk.core.dialects.cursor import CONTEXT_LIMIT, fit


def context_of(text: str) -> str:
    cursor = dialect_for("cursor")
    event = cursor.parse(None, '{"hook_event_name": "postToolUse", "cursor_version": "2.1"}')
    value = json.loads(cursor.render(event, text))["additional_context"]
    assert isinstance(value, str)
    return value


def test_exactly_ten_thousand_characters_pass_untouched() -> None:
    """The limit is inclusive: 10,000 characters go through as they are."""
    text = "a" * 9_999 + "z"
    assert context_of(text) == text


def test_one_character_over_is_cut_with_a_note() -> None:
    """10,001 characters become at most 10,000, ending with a note stating the exact cut."""
    text = "a" * 10_001
    got = context_of(text)
    assert len(got) <= CONTEXT_LIMIT
    kept = got.index("\n[crosstalk cut")
    assert got[:kept] == text[:kept]
    stated = int(re.search(r"cut the last (\d+) characters", got).group(1))  # type: ignore[union-attr]
    assert stated == len(text) - kept


@given(st.integers(min_value=CONTEXT_LIMIT + 1, max_value=3 * 10**6))
def test_trim_note_always_states_the_true_cut_and_fits(length: int) -> None:
    """For any over-long text, the answer fits and the note's number is what was cut."""
    got = fit("b" * length)
    assert CONTEXT_LIMIT - 1 <= len(got) <= CONTEXT_LIMIT
    kept = got.index("\n[crosstalk cut")
    stated = int(re.search(r"cut the last (\d+) characters", got).group(1))  # type: ignore[union-attr]
    assert stated == length - kept


def test_note_tells_the_agent_where_the_rest_is() -> None:
    """The note names the tools that show what was cut."""
    got = context_of("c" * 50_000)
    assert got.endswith("call crosstalk_read and crosstalk_facts to see everything.]")
