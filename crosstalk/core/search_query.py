"""What a person types into ``crosstalk search``, as an SQLite FTS5 query expression.

Theory of operation
-------------------
Search takes plain words by default. People and agents type what they remember: ``foo-bar``,
``c++``, ``ben's migration``, ``v2.1: rollback``. Handed to FTS5 as they are, half of these are
syntax errors (``-`` and ``:`` are FTS5 operators: ``foo:bar`` asks for a column called ``foo``)
and a few mean something else. So each whitespace-separated word is quoted as an FTS5 string
(a double quote inside doubled), and the words are joined by spaces, which FTS5 reads as AND:
every word must occur, in any order. Inside a quoted string FTS5 runs its tokenizer, so
``"foo-bar"`` is the phrase *foo bar* and ``"c++"`` the word *c*. A word ending in ``*`` (``migr*``)
stays a prefix query. A word with no letter or digit in it (``-``, ``*``, ``++``) names nothing
the tokenizer keeps and is dropped; a query left with no words is a usage error.

FTS5 syntax is for those who ask for it: a query holding a double quote or a parenthesis, or one
of FTS5's operators as a whole upper-case word (``AND``, ``OR``, ``NOT``, ``NEAR``), goes to FTS5 as
written (``"exact phrase"``, ``deploy OR rollback``, ``NEAR(db lock, 5)``). Whether it parses is
for the store to find out (FTS5 is the only parser of its own grammar); the store turns a failure
into one ``usage`` sentence (:data:`SYNTAX_HELP`).

No state, no I/O: a pure function of the text.
"""

from __future__ import annotations

import attrs

from crosstalk.errors import UsageError

#: FTS5's operators, which it recognises only in upper case.
OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
#: Longest query taken: longer is no search anyone typed, and FTS5 parses it on every call.
MAX_QUERY = 1000
SYNTAX_HELP = (
    "search plain words (each must occur), or write FTS5 syntax correctly: "
    '"a phrase", word*, a OR b, a NOT b, NEAR(a b, 5), with quotes and parentheses balanced'
)


@attrs.frozen
class FtsQuery:
    """The FTS5 expression to run, and whether it is the person's own syntax (``raw``)."""

    expression: str
    raw: bool


def _quoted(word: str) -> str | None:
    """``word`` as one FTS5 string (a prefix query if it ends in ``*``); None if it names
    nothing (no letter or digit)."""
    prefix = word.endswith("*")
    core = word.rstrip("*") if prefix else word
    if not any(ch.isalnum() for ch in core):
        return None
    return '"' + core.replace('"', '""') + '"' + ("*" if prefix else "")


def wants_syntax(text: str) -> bool:
    """Whether ``text`` asks for FTS5 syntax (see the module docstring)."""
    if any(ch in text for ch in '"()'):
        return True
    return any(word in OPERATORS for word in text.split())


def to_fts(text: str) -> FtsQuery:
    """The FTS5 expression for what was typed.

    Raises:
        UsageError: nothing to search for, or a query too long.
    """
    # NUL ends a string inside FTS5's parser; no word holds one.
    text = text.replace("\x00", " ")
    if len(text) > MAX_QUERY:
        raise UsageError(f"A search is at most {MAX_QUERY} characters.")
    if wants_syntax(text):
        return FtsQuery(text.strip(), raw=True)
    words = [q for q in (_quoted(word) for word in text.split()) if q is not None]
    if not words:
        raise UsageError("Nothing to search for: give at least one word with a letter or digit.")
    return FtsQuery(" ".join(words), raw=False)
