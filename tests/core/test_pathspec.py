"""Pathspecs: matching as git does, refusing what git would not read, exact overlap, and the
character set algebra under it."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.core.charset import CharSet, intersect, normalise, pick, subtract
from crosstalk.core.pathspec import PathspecError, common_path, matches, overlaps, parse

# --- an independent oracle: git's wildmatch (WM_PATHNAME), transcribed, plus the literal rule ---

MATCH, NOMATCH, ABORT_ALL, ABORT_TO_STARSTAR = 0, 1, -1, -2


def _at(s: str, i: int) -> str:
    return s[i] if i < len(s) else ""


def _dowild(p: str, text: str) -> int:
    """git's dowild() (wildmatch.c), line by line, with WM_PATHNAME and without case folding."""
    pi = ti = 0
    while pi < len(p):
        p_ch, t_ch = p[pi], _at(text, ti)
        if t_ch == "" and p_ch != "*":
            return ABORT_ALL
        if p_ch == "\\":
            pi += 1
            if t_ch != _at(p, pi):
                return NOMATCH
        elif p_ch == "?":
            if t_ch == "/":
                return NOMATCH
        elif p_ch == "*":
            pi += 1
            match_slash = False
            if _at(p, pi) == "*":
                prev = pi - 2
                pi += 1
                while _at(p, pi) == "*":
                    pi += 1
                rest = p[pi:]
                if (prev < 0 or p[prev] == "/") and (rest[:1] in ("", "/") or rest[:2] == "\\/"):
                    if rest[:1] == "/" and _dowild(p[pi + 1 :], text[ti:]) == MATCH:
                        return MATCH
                    match_slash = True
            if pi == len(p):
                return NOMATCH if not match_slash and "/" in text[ti:] else MATCH
            if not match_slash and p[pi] == "/":
                slash = text.find("/", ti)
                if slash == -1:
                    return NOMATCH
                pi, ti = pi + 1, slash + 1
                continue
            while t_ch != "":
                if p[pi] not in "*?[\\":
                    while ti < len(text) and (match_slash or text[ti] != "/"):
                        if text[ti] == p[pi]:
                            break
                        ti += 1
                    t_ch = _at(text, ti)
                    if t_ch != p[pi]:
                        return NOMATCH
                matched = _dowild(p[pi:], text[ti:])
                if matched != NOMATCH:
                    if not match_slash or matched != ABORT_TO_STARSTAR:
                        return matched
                elif not match_slash and t_ch == "/":
                    return ABORT_TO_STARSTAR
                ti += 1
                t_ch = _at(text, ti)
            return ABORT_ALL
        elif p_ch == "[":
            pi += 1
            c = "!" if _at(p, pi) == "^" else _at(p, pi)
            negated = c == "!"
            if negated:
                pi += 1
                c = _at(p, pi)
            prev_ch, matched_class = "", False
            while True:
                if c == "":
                    return ABORT_ALL
                if c == "\\":
                    pi += 1
                    c = _at(p, pi)
                    if c == "":
                        return ABORT_ALL
                    matched_class |= t_ch == c
                elif c == "-" and prev_ch and _at(p, pi + 1) not in ("", "]"):
                    pi += 1
                    c = p[pi]
                    if c == "\\":
                        pi += 1
                        c = _at(p, pi)
                        if c == "":
                            return ABORT_ALL
                    matched_class |= prev_ch <= t_ch <= c
                    c = ""
                else:
                    matched_class |= t_ch == c
                prev_ch = c
                pi += 1
                c = _at(p, pi)
                if c == "]":
                    break
            if matched_class == negated or t_ch == "/":
                return NOMATCH
        elif t_ch != p_ch:
            return NOMATCH
        pi, ti = pi + 1, ti + 1
    return NOMATCH if ti < len(text) else MATCH


def git_matches(pattern: str, path: str) -> bool:
    """``match_pathspec_item``'s literal rule (the path is the text or under it), else
    wildmatch over the whole pattern (git's literal-prefix stripping is the one quirk we skip)."""
    prefix = pattern if pattern.endswith("/") else pattern + "/"
    if path == pattern or path.startswith(prefix):
        return True
    return any(c in pattern for c in "*?[\\") and _dowild(pattern, path) == MATCH


# --- patterns and a universe of paths small enough to search -----------------------------------

LETTERS = "abc"
SEGMENTS = ["".join(t) for n in (1, 2) for t in itertools.product(LETTERS, repeat=n)]
# Names with wildcard characters in them, for git's literal rule ("a?" names a file "a?" too).
ODD = ["*", "?", "a?", "*b", "[ab]"]
UNIVERSE = [
    *("/".join(t) for n in (1, 2, 3) for t in itertools.product(SEGMENTS, repeat=n)),
    *ODD,
    *("/".join(t) for t in itertools.product(SEGMENTS + ODD, repeat=2) if set(t) & set(ODD)),
]

TOKENS = st.sampled_from(["a", "b", "c", "?", "*", "**", "[ab]", "[!a]", "[b-c]", "[^c]", "\\b"])


@st.composite
def globs(draw: st.DrawFn) -> str:
    """A pattern of one to three segments: plain, wildcarded, or ``**``."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 4)) == 0:
            parts.append("**")
        else:
            parts.append("".join(draw(st.lists(TOKENS, min_size=1, max_size=3))))
    text = "/".join(parts)
    if not any(c in text for c in "*?[\\") and draw(st.booleans()):
        text += "/"  # a plain directory
    return text


# --- matching ----------------------------------------------------------------------------------

MATCHING = [
    ("src/a.py", "src/a.py", True),
    ("src", "src/auth/x.py", True),
    ("src/", "src/auth/x.py", True),
    ("src/", "src", False),
    ("src", "srcx/a.py", False),
    ("src/*", "src/a.py", True),
    ("src/*", "src/auth/x.py", False),
    ("src/*.py", "src/a.py", True),
    ("src/**", "src/auth/y/z.py", True),
    ("src/**", "src", False),
    ("**/a.py", "a.py", True),
    ("**/a.py", "x/src/a.py", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/xb", False),
    ("a**b", "a/x/b", False),
    ("a**b", "axxb", True),
    ("?", "q", True),
    ("?", "qr", False),
    ("c[]!-]d", "c]d", True),
    ("c[!]]d", "c]d", False),
    ("c[-a]*", "c-d", True),
    ("[a-c]/[!a]", "b/c", True),
    ("[a-c]/[!a]", "b/a", False),
    ("pages/[id].tsx", "pages/i.tsx", True),
    ("pages/[id].tsx", "pages/[id].tsx", True),
    ("app/[slug]", "app/[slug]/page.tsx", True),
    ("docs/a\\*b", "docs/a*b", True),
    ("docs/a\\*b", "docs/ab", False),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), MATCHING)
def test_patterns_match_as_git_pathspecs_do(pattern: str, path: str, expected: bool) -> None:
    """A table of cases (each also run through ``git ls-files ':(glob)…'`` below)."""
    assert matches(pattern, path) is expected
    assert git_matches(pattern, path) is expected


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_matching_agrees_with_git_ls_files(tmp_path: Path) -> None:
    """Real git lists, for each pattern of the table, exactly the files we say it names."""
    files = sorted({path for _, path, _ in MATCHING if path != "src"})
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    for pattern in sorted({pattern for pattern, _, _ in MATCHING}):
        listed = subprocess.run(
            [*git, "ls-files", "-z", "--", f":(glob){pattern}"],
            check=True, capture_output=True, text=True,
        ).stdout.split("\0")
        ours = {path for path in files if matches(pattern, path)}
        assert set(filter(None, listed)) == ours, pattern


@settings(max_examples=400)
@given(pattern=globs(), path=st.sampled_from(UNIVERSE))
def test_matching_agrees_with_a_transcription_of_git_wildmatch(pattern: str, path: str) -> None:
    """Our parser and regex against a line-by-line port of git's matcher."""
    assert matches(pattern, path) == git_matches(pattern, path)


def test_the_oracle_can_tell_patterns_apart() -> None:
    """The transcription is no yes-man: it refuses what git refuses."""
    assert not git_matches("src/*", "src/a/b")
    assert not git_matches("[!a]", "a")
    assert git_matches("**/b", "a/a/b")


# --- refusing ----------------------------------------------------------------------------------

REFUSED = [
    ("", "empty"),
    ("/src/a.py", "relative to the repository root"),
    ("src//a.py", "empty, '.' and '..'"),
    ("./src", "empty, '.' and '..'"),
    ("src/../etc", "empty, '.' and '..'"),
    ("src/\tx", "control characters"),
    ("src/*/", "names only directories"),
    ("src/[ab", "no closing ']'"),
    ("src/[a/b]", "no closing ']'"),
    ("src/[z-a]", "reversed"),
    ("src/[[:alpha:]]", "POSIX classes"),
    ("src/a\\", "must escape"),
    ("src\\/a", "must escape"),
    ("x/" + "*a" * 33, "at most 64 characters"),
]


@pytest.mark.parametrize(("pattern", "why"), REFUSED)
def test_malformed_patterns_are_refused_saying_why(pattern: str, why: str) -> None:
    """Each rule gives its own sentence."""
    with pytest.raises(PathspecError, match=why.replace("[", r"\[").replace(".", r"\.")):
        parse(pattern)


def test_plain_and_glob_patterns_are_told_apart() -> None:
    """Only wildcards (or escapes) make a glob; its fixed prefix stops at the first one."""
    assert not parse("src/auth/").is_glob
    spec = parse("src/a*/b")
    assert spec.is_glob and spec.fixed_prefix == "src/a"


# --- overlap -----------------------------------------------------------------------------------

OVERLAPS = [
    ("src/**", "src/auth/login.py", True),
    ("src/*.py", "src/auth/login.py", False),
    ("src/auth", "src/auth/login.py", True),
    ("src/auth", "src/authz/login.py", False),
    ("**/*.md", "docs/**", True),
    ("*.py", "src/*.py", False),
    ("a/**", "a", True),
    ("a/**/b", "a/b", True),
    ("a/b/**", "**/c/a", True),
    ("a/*/c", "a/b/*/c", False),
    ("[ab]x", "[!a]x", True),
    ("[ab]", "[!ab]", False),
    ("*a*", "*b*", True),
    ("a*", "*b", True),
    ("a?", "?ab", False),
    ("**", "x", True),
    ("src/*", "src/*/**", True),  # through a directory literally named "src/*", as in git
    ("tests/**", "src/**", False),
]


@pytest.mark.parametrize(("a", "b", "expected"), OVERLAPS)
def test_overlap_is_decided_with_a_common_path_as_proof(a: str, b: str, expected: bool) -> None:
    """Overlap is symmetric, and a yes names a path both patterns match."""
    assert overlaps(a, b) is expected
    assert overlaps(b, a) is expected
    witness = common_path(a, b)
    assert (witness is not None) is expected
    if witness is not None:
        assert matches(a, witness) and matches(b, witness)


@settings(max_examples=300)
@given(a=globs(), b=globs())
def test_overlap_is_exact_against_brute_force(a: str, b: str) -> None:
    """Yes comes with a path both match; no means no path of the universe is matched by both,
    and any path of the universe both match makes it yes."""
    witness = common_path(a, b)
    both = [p for p in UNIVERSE if matches(a, p) and matches(b, p)]
    if witness is None:
        assert both == []
    else:
        assert matches(a, witness) and matches(b, witness)
    assert (common_path(b, a) is None) == (witness is None)


def test_overlap_is_exact_for_every_pair_of_short_patterns() -> None:
    """Exhaustively, for patterns of up to two tokens (and a few with ``**``) and the universe."""
    tokens = ["a", "b", "?", "*", "[ab]", "[!a]"]
    patterns = [
        "".join(t) for n in (1, 2) for t in itertools.product(tokens, repeat=n)
    ] + ["**", "a/**", "**/b"]
    named = {p: frozenset(u for u in UNIVERSE if matches(p, u)) for p in patterns}
    for a, b in itertools.product(patterns, repeat=2):
        witness = common_path(a, b)
        if witness is None:
            assert not named[a] & named[b], (a, b)
        else:
            assert matches(a, witness) and matches(b, witness), (a, b, witness)


def test_a_long_pattern_pair_is_decided() -> None:
    """Patterns near the wire's length limit, full of stars, still get an exact answer."""
    a = "/".join(["*a?b*"] * 40)  # "aabba" is in both segment patterns
    b = "/".join(["*b?a*"] * 40)
    witness = common_path(a, b)
    assert witness is not None and matches(a, witness) and matches(b, witness)
    assert not overlaps(a, b + "/x")


# --- character sets ----------------------------------------------------------------------------

RANGES = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 8)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=4,
)


def _points(charset: CharSet) -> set[int]:
    return {c for low, high in charset for c in range(low, high + 1)}


@given(a=RANGES, b=RANGES)
def test_character_set_algebra_agrees_with_python_sets(
    a: list[tuple[int, int]], b: list[tuple[int, int]]
) -> None:
    """Normalised, intersected and subtracted range lists hold exactly the right code points."""
    set_a, set_b = normalise(a), normalise(b)
    assert _points(set_a) == {c for low, high in a for c in range(low, high + 1)}
    assert all(x[1] + 1 < y[0] for x, y in itertools.pairwise(set_a))  # disjoint, apart, sorted
    assert _points(intersect(set_a, set_b)) == _points(set_a) & _points(set_b)
    assert _points(subtract(set_a, set_b)) == _points(set_a) - _points(set_b)
    if set_a:
        assert ord(pick(set_a)) in _points(set_a)
