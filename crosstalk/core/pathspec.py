"""Repository paths and globs as git pathspecs name them, and whether two can name one file.

Theory of operation
-------------------
A reservation names files by patterns relative to the repository root. They mean what git's
``:(glob)`` pathspecs mean (git ``dir.c`` ``match_pathspec_item`` and ``wildmatch.c`` with
``WM_PATHNAME``), so the pre-commit guard and ``git ls-files ':(glob)PATTERN'`` agree with us:

- A pattern matches a path when the path *is* the pattern's text, or lies under it (``src/auth``
  and ``src/auth/`` name that file or directory and everything below). That is git's literal
  prefix rule, and it applies to globs too: ``app/[slug]`` names the directory of that name and
  everything in it (as well as ``app/s``, ``app/l`` …). So, as in git, ``src/*`` and ``src/*/**``
  overlap: both name what is under a directory literally called ``src/*``. We keep git's rule
  rather than a tidier one because a missed overlap defeats a reservation, and an extra one only
  asks someone to narrow theirs.
- A pattern with wildcards also matches every path the glob matches: ``*`` any run of characters
  within one segment, ``?`` one character but ``/``, ``[a-z]``/``[!a-z]``/``[^a-z]`` one
  character of (not of) a class, ``\\x`` the character x. A segment that is only stars (``**``)
  is any number of whole segments: none or more at the start (``**/x``) or between (``a/**/b``),
  one or more at the end (``a/**``: everything inside ``a``). Stars inside a segment (``a**b``)
  are one ``*``. A glob names files only: ``src/*`` is the files directly in ``src``.
  (One git quirk is not copied: git strips a pattern's literal prefix before calling wildmatch,
  so in ``src/a**`` the stars start its pattern and cross ``/``; here they stay one ``*``.)

Refused, with a :class:`PathspecError` saying why: an empty pattern, a leading ``/``, empty,
``.`` or ``..`` segments, control characters, a glob ending in ``/`` (it names only directories,
so nothing), an unterminated or reversed class, POSIX classes (``[:alpha:]``), a ``\\`` at the end
or before ``/``, and a segment with wildcards longer than :data:`MAX_GLOB_SEGMENT` characters (it
bounds what deciding an overlap costs every replica). Paths compare case-sensitively, as in git.

Each pattern parses into one or two *alternatives* (the literal rule, and the glob), each a
sequence of parts: a :data:`Segment` (a tuple of tokens matching exactly one path segment) or
:data:`GLOBSTAR` (any number of whole segments). Two patterns overlap when some pair of their
alternatives accepts a common path. :func:`common_path` decides that exactly by searching the
product of the two sequences (states ``(i, j)``: parts consumed on each side); moving on a segment
asks whether two segment patterns share a non-empty string: a regex match when one of them is
plain text, else a search over the product of their tokens where each step needs a character both
classes admit (:mod:`crosstalk.core.charset`, exact for all of Unicode). The searches record how
they reached each state, so a "yes" comes with a path both patterns match, which the tests check
with :func:`matches`. Two patterns that part ways before their first wildcard are told apart at
once; the rest costs at most (parts + 1)^2 and (tokens + 1)^2 x 2 states, and is cached.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterator

import attrs

from crosstalk.core.charset import (
    EVERYTHING,
    MAX_CODE,
    CharSet,
    intersect,
    normalise,
    pick,
    subtract,
)

# Character sets here never hold "/" or NUL (see ANY).
STAR = None  # the "*" token: any run of characters within a segment
Token = CharSet | None
Segment = tuple[Token, ...]


class _GlobStar:
    """The ``**`` part: any number of whole segments (a singleton, :data:`GLOBSTAR`)."""

    def __repr__(self) -> str:
        return "GLOBSTAR"


GLOBSTAR = _GlobStar()
Part = Segment | _GlobStar
Alternative = tuple[Part, ...]

ANY: CharSet = ((1, ord("/") - 1), (ord("/") + 1, MAX_CODE))
ANY_SEGMENT: Segment = (STAR,)  # with a segment's non-emptiness: any one segment
_GLOB_SPECIALS = frozenset("*?[\\")
MAX_GLOB_SEGMENT = 64


class PathspecError(ValueError):
    """A reservation pattern git would not read as a repository path or glob; says which rule."""


@attrs.frozen
class Pathspec:
    """One parsed pattern: its text and the alternatives it matches by (see the module doc)."""

    text: str
    alternatives: tuple[Alternative, ...]
    glob: re.Pattern[str] | None = attrs.field(eq=False, repr=False)

    @property
    def fixed_prefix(self) -> str:
        """The text before the first wildcard or escape: every path named starts with it."""
        for i, c in enumerate(self.text):
            if c in _GLOB_SPECIALS:
                return self.text[:i]
        return self.text

    @property
    def is_glob(self) -> bool:
        """True if the pattern has wildcards (a plain path only names itself and what is under)."""
        return self.glob is not None


# --- parsing -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Pathspec:
    """Parse a repository-relative path or glob.

    Args:
        text: the pattern, with ``/`` between segments, relative to the repository root.

    Returns:
        The :class:`Pathspec`.

    Raises:
        PathspecError: the pattern breaks a rule of the module doc; the message says which.
    """
    _check_text(text)
    literal = _literal_alternative(text)
    if not _GLOB_SPECIALS.intersection(text):
        return Pathspec(text, (literal,), None)
    if text.endswith("/"):
        raise PathspecError(
            f"{text!r}: a glob ending in '/' names only directories, so no file; "
            f"write {text + '**'!r} for everything under them"
        )
    glob = tuple(_glob_part(text, segment) for segment in text.split("/"))
    if glob[-1] is GLOBSTAR:  # a trailing ** is one or more segments ("a/**" is not "a")
        glob = (*glob[:-1], ANY_SEGMENT, GLOBSTAR)
    return Pathspec(text, (literal, glob), re.compile(_regex(glob)))


def _check_text(text: str) -> None:
    if not text:
        raise PathspecError("a pattern cannot be empty")
    if text.startswith("/"):
        raise PathspecError(f"{text!r}: patterns are relative to the repository root; drop the '/'")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise PathspecError(f"{text!r}: a pattern cannot contain control characters")
    segments = text[:-1].split("/") if text.endswith("/") else text.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise PathspecError(
                f"{text!r}: empty, '.' and '..' segments are not allowed; name paths from the "
                f"repository root"
            )
    if text.endswith("\\") or "\\/" in text:
        raise PathspecError(f"{text!r}: a '\\' must escape a character other than '/'")


def _literal_alternative(text: str) -> Alternative:
    """Git's literal rule: the path is the text, or under it."""
    if text.endswith("/"):
        parts = tuple(_literal_segment(s) for s in text[:-1].split("/"))
        return (*parts, ANY_SEGMENT, GLOBSTAR)
    return (*(_literal_segment(s) for s in text.split("/")), GLOBSTAR)


def _literal_segment(segment: str) -> Segment:
    return tuple(((ord(c), ord(c)),) for c in segment)


def _glob_part(text: str, segment: str) -> Part:
    if len(segment) >= 2 and set(segment) == {"*"}:
        return GLOBSTAR
    tokens = tuple(_tokens(text, segment))
    if len(segment) > MAX_GLOB_SEGMENT and _fixed_text(tokens) is None:
        # Deciding overlap costs the product of two such segments' lengths on every replica.
        raise PathspecError(
            f"{text!r}: a segment with wildcards is at most {MAX_GLOB_SEGMENT} characters"
        )
    return tokens


def _tokens(text: str, segment: str) -> Iterator[Token]:
    i, n = 0, len(segment)
    while i < n:
        c = segment[i]
        if c == "*":
            while i < n and segment[i] == "*":
                i += 1
            yield STAR
            continue
        if c == "?":
            yield ANY
        elif c == "[":
            charset, i = _char_class(text, segment, i)
            yield charset
            continue
        else:
            if c == "\\":
                i += 1
                c = segment[i]  # present: _check_text refused a trailing "\" and "\/"
            yield ((ord(c), ord(c)),)
        i += 1


def _char_class(text: str, segment: str, start: int) -> tuple[CharSet, int]:
    """Parse ``[...]`` at ``segment[start]`` as wildmatch does; return it and the index after."""
    i, n = start + 1, len(segment)
    negated = i < n and segment[i] in "!^"
    i += negated
    ranges: list[tuple[int, int]] = []
    first = True
    while True:
        if i >= n:
            raise PathspecError(f"{text!r}: a '[' has no closing ']' within its segment")
        c = segment[i]
        if c == "]" and not first:
            break
        first = False
        if c == "[" and segment.startswith("[:", i):
            raise PathspecError(f"{text!r}: POSIX classes like [:alpha:] are not supported")
        low, i = _class_char(text, segment, i)
        high = low
        if i + 1 < n and segment[i] == "-" and segment[i + 1] != "]":
            high, i = _class_char(text, segment, i + 1)
            if high < low:
                raise PathspecError(f"{text!r}: the range {chr(low)}-{chr(high)} is reversed")
        ranges.append((low, high))
    wanted = normalise(ranges)
    charset = subtract(ANY, wanted) if negated else intersect(ANY, wanted)
    return charset, i + 1


def _class_char(text: str, segment: str, i: int) -> tuple[int, int]:
    if segment[i] == "\\":
        i += 1
        if i >= len(segment):
            raise PathspecError(f"{text!r}: a '[' has no closing ']' within its segment")
    return ord(segment[i]), i + 1


# --- matching ----------------------------------------------------------------------------------


def matches(pattern: Pathspec | str, path: str) -> bool:
    """Whether ``pattern`` names ``path`` (a repository-relative file path, ``a/b/c.py``).

    Raises:
        PathspecError: ``pattern`` is a string that does not parse.
    """
    spec = parse(pattern) if isinstance(pattern, str) else pattern
    text = spec.text
    if path == text or path.startswith(text if text.endswith("/") else text + "/"):
        return True
    # The regex reads "segment/" units, so the path gets the slash its last segment lacks.
    return spec.glob is not None and spec.glob.fullmatch(path + "/") is not None


def _regex(alternative: Alternative) -> str:
    units = []
    for part in alternative:
        if isinstance(part, _GlobStar):
            units.append("(?:[^/]+/)*")
        else:
            units.append("(?=[^/])" + "".join(_token_regex(t) for t in part) + "/")
    return "".join(units)


def _token_regex(token: Token) -> str:
    if token is None:
        return "[^/]*"
    if not token:
        return "(?!)"  # a class that admits nothing (unreachable from parse, kept for safety)
    if token[-1][1] == MAX_CODE:
        # A negated class: write it as one (re takes ~0.1 s to compile a range to U+10FFFF).
        left_out = subtract(EVERYTHING, token)
        return f"[^{_ranges_regex(left_out)}]"
    return f"[{_ranges_regex(token)}]"


def _ranges_regex(charset: CharSet) -> str:
    return "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in charset)


# --- overlap -----------------------------------------------------------------------------------


def overlaps(a: Pathspec | str, b: Pathspec | str) -> bool:
    """Whether some path is named by both patterns (decided exactly; see the module doc).

    Raises:
        PathspecError: a string argument does not parse.
    """
    return common_path(a, b) is not None


def common_path(a: Pathspec | str, b: Pathspec | str) -> str | None:
    """A path both patterns name, or None if there is none.

    Raises:
        PathspecError: a string argument does not parse.
    """
    spec_a = parse(a) if isinstance(a, str) else a
    spec_b = parse(b) if isinstance(b, str) else b
    prefix_a, prefix_b = spec_a.fixed_prefix, spec_b.fixed_prefix
    if not (prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a)):
        return None  # they part ways before any wildcard (most pairs: cheap, and exact)
    for alt_a in spec_a.alternatives:
        for alt_b in spec_b.alternatives:
            found = _common_path(alt_a, alt_b)
            if found is not None:
                return found
    return None


@functools.lru_cache(maxsize=8192)
def _common_path(a: Alternative, b: Alternative) -> str | None:
    """Search the product of two part sequences for a path of one or more segments."""
    start = (0, 0, False)
    came_from: dict[tuple[int, int, bool], tuple[tuple[int, int, bool], str | None]] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        state = queue.popleft()
        i, j, some = state
        if i == len(a) and j == len(b) and some:
            return "/".join(_walk_back(came_from, state))
        for nxt, segment in _path_moves(a, b, i, j):
            key = (nxt[0], nxt[1], some or segment is not None)
            if key not in seen:
                seen.add(key)
                came_from[key] = (state, segment)
                queue.append(key)
    return None


def _path_moves(
    a: Alternative, b: Alternative, i: int, j: int
) -> Iterator[tuple[tuple[int, int], str | None]]:
    """Moves from state ``(i, j)``: skip a ``**`` (no segment), or consume one common segment."""
    part_a = a[i] if i < len(a) else None
    part_b = b[j] if j < len(b) else None
    if part_a is GLOBSTAR:
        yield (i + 1, j), None
    if part_b is GLOBSTAR:
        yield (i, j + 1), None
    if part_a is None or part_b is None or (part_a is GLOBSTAR and part_b is GLOBSTAR):
        return  # both stars consuming a segment would stay put: skipping covers it
    seg_a = ANY_SEGMENT if isinstance(part_a, _GlobStar) else part_a
    seg_b = ANY_SEGMENT if isinstance(part_b, _GlobStar) else part_b
    common = _common_segment(seg_a, seg_b)
    if common is not None:
        yield (i + (part_a is not GLOBSTAR), j + (part_b is not GLOBSTAR)), common


@functools.lru_cache(maxsize=8192)
def _common_segment(a: Segment, b: Segment) -> str | None:
    """A non-empty string (no ``/``) both segment patterns match, or None."""
    for fixed, other in ((a, b), (b, a)):
        text = _fixed_text(fixed)
        if text is not None:  # one string: just match it (the common case, and linear)
            return text if text and _segment_regex(other).fullmatch(text) else None
    start = (0, 0, False)
    came_from: dict[tuple[int, int, bool], tuple[tuple[int, int, bool], str | None]] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        state = queue.popleft()
        p, q, some = state
        if p == len(a) and q == len(b) and some:
            return "".join(_walk_back(came_from, state))
        for key, char in _segment_moves(a, b, p, q, some):
            if key not in seen:
                seen.add(key)
                came_from[key] = (state, char)
                queue.append(key)
    return None


def _segment_moves(
    a: Segment, b: Segment, p: int, q: int, some: bool
) -> Iterator[tuple[tuple[int, int, bool], str | None]]:
    """Moves from ``(p, q)``: a ``*`` matching nothing more, or one character both admit."""
    if p < len(a) and a[p] is STAR:
        yield (p + 1, q, some), None
    if q < len(b) and b[q] is STAR:
        yield (p, q + 1, some), None
    if p == len(a) or q == len(b):
        return
    token_a, token_b = a[p], b[q]
    char = _common_char(token_a, token_b)
    if char is not None:
        yield (p + (token_a is not STAR), q + (token_b is not STAR), True), char


@functools.lru_cache(maxsize=1024)
def _common_char(a: Token, b: Token) -> str | None:
    both = intersect(ANY if a is None else a, ANY if b is None else b)
    return pick(both) if both else None


def _fixed_text(segment: Segment) -> str | None:
    """The one string a segment of single characters matches, or None if it has wildcards."""
    if all(t is not None and len(t) == 1 and t[0][0] == t[0][1] for t in segment):
        return "".join(chr(t[0][0]) for t in segment if t is not None)
    return None


@functools.lru_cache(maxsize=4096)
def _segment_regex(segment: Segment) -> re.Pattern[str]:
    return re.compile("".join(_token_regex(t) for t in segment))


def _walk_back(
    came_from: dict[tuple[int, int, bool], tuple[tuple[int, int, bool], str | None]],
    state: tuple[int, int, bool],
) -> list[str]:
    pieces: list[str] = []
    while state in came_from:
        state, piece = came_from[state]
        if piece is not None:
            pieces.append(piece)
    pieces.reverse()
    return pieces
