"""Plain words become quoted FTS5 strings; FTS5 syntax passes through only when asked for."""

from __future__ import annotations

import pytest

from crosstalk.core.search_query import MAX_QUERY, FtsQuery, to_fts
from crosstalk.errors import UsageError


@pytest.mark.parametrize(
    ("typed", "expression"),
    [
        ("migration", '"migration"'),
        ("foo-bar c++", '"foo-bar" "c++"'),
        ("v2:rollback -x", '"v2:rollback" "-x"'),
        ("migr*", '"migr"*'),
        ("ben's  plan\tnow", '"ben\'s" "plan" "now"'),
        ("and or not near", '"and" "or" "not" "near"'),  # lower case: words, not operators
        ("a - * ++ b", '"a" "b"'),  # no letter or digit: nothing the tokenizer keeps
        ("nul\x00byte", '"nul" "byte"'),
    ],
)
def test_plain_words_are_quoted(typed: str, expression: str) -> None:
    """Each word is one FTS5 string (a trailing * a prefix); the words are ANDed."""
    assert to_fts(typed) == FtsQuery(expression, raw=False)


@pytest.mark.parametrize(
    "typed", ['"a phrase"', "a OR b", "a NOT b", "NEAR(a b, 5)", "(a)", 'half "quote', "AND"]
)
def test_fts_syntax_passes_as_written(typed: str) -> None:
    """A quote, a parenthesis or an upper-case operator word: the person's own syntax."""
    assert to_fts(typed) == FtsQuery(typed, raw=True)


@pytest.mark.parametrize("typed", ["", "   ", "*", "-", "+-+ *"])
def test_nothing_to_search_for_is_a_usage_error(typed: str) -> None:
    """No word with a letter or digit: usage, naming what is missing."""
    with pytest.raises(UsageError, match="Nothing to search for"):
        to_fts(typed)


def test_a_query_too_long_is_a_usage_error() -> None:
    """Past MAX_QUERY characters: usage."""
    with pytest.raises(UsageError, match="at most"):
        to_fts("a " * MAX_QUERY)
