"""The commit guard's decision: which reservations refuse a commit, and what the refusal says."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.guard import (
    SHOWN_PATHS,
    Conflict,
    HeldReservation,
    Outcome,
    Reservations,
    decide,
    find_conflicts,
    guard_disabled,
    minutes_left,
    one_line,
    parse_reply,
    refusal_message,
    skipped,
    split_paths,
    unchecked,
)
from crosstalk.core.pathspec import matches
from crosstalk.errors import RemoteProtocolError

NOW = 1_000_000.0


def held(**fields: Any) -> HeldReservation:
    defaults: dict[str, Any] = {
        "id": "r1", "holder": "ben", "paths": ("src/**",), "repo": "app", "until": NOW + 600,
        "shared": False, "mine": False, "reason": "",
    }  # fmt: skip
    return HeldReservation(**{**defaults, **fields})


def clock(when: float) -> str:
    return f"T+{when - NOW:g}"


def conflicts(staged: list[str], *rows: HeldReservation, repo: str = "app") -> tuple[Conflict, ...]:
    return find_conflicts(staged, Reservations(rows, NOW), repo=repo)


# --- which reservations refuse -------------------------------------------------------------------


def test_someone_elses_exclusive_running_reservation_refuses() -> None:
    """A staged path under another's exclusive reservation in this repository is a conflict."""
    (found,) = conflicts(["README.md", "src/x.py"], held())
    assert found.reservation.holder == "ben" and found.staged == ("src/x.py",)


@pytest.mark.parametrize(
    ("row", "why"),
    [
        (held(mine=True), "one's own reservation"),
        (held(shared=True), "a shared reservation"),
        (held(repo="other"), "another repository"),
        (held(until=NOW), "a reservation ending now"),
        (held(until=NOW - 1), "a reservation already over"),
        (held(paths=("docs/**",)), "paths not staged"),
        (held(paths=("src/x",)), "a literal naming a sibling's prefix only"),
    ],
)
def test_what_does_not_refuse(row: HeldReservation, why: str) -> None:
    """Own, shared, other-repository, lapsed and non-matching reservations never refuse."""
    assert conflicts(["src/x.py"], row) == (), why


def test_a_literal_pattern_names_itself_and_what_is_under_it_only() -> None:
    """``src`` names src/x.py, not src2/x.py (git's literal prefix rule, whole segments)."""
    (found,) = conflicts(["src2/x.py", "src/x.py", "src"], held(paths=("src",)))
    assert found.staged == ("src/x.py", "src")


def test_repository_names_compare_case_insensitively() -> None:
    """``App`` held is ``app`` here."""
    assert conflicts(["src/x.py"], held(repo="App"), repo="aPP")


def test_each_conflicting_reservation_is_reported_in_reply_order() -> None:
    """Two holders, two conflicts, each with the staged paths it names."""
    rows = (
        held(id="a", holder="ben", paths=("src/*.py",)),
        held(id="b", holder="cy", paths=("docs/", "src/x.py")),
        held(id="c", holder="dee", paths=("tests/**",)),
    )
    found = conflicts(["docs/a.md", "src/x.py", "src/y.txt"], *rows)
    assert [(c.reservation.id, c.staged) for c in found] == [
        ("a", ("src/x.py",)),
        ("b", ("docs/a.md", "src/x.py")),
    ]


def test_a_pattern_that_does_not_parse_names_nothing() -> None:
    """A damaged pattern in the reply neither refuses nor breaks the check."""
    assert conflicts(["src/x.py"], held(paths=("/src/**", "src/[x"))) == ()
    assert conflicts(["src/x.py"], held(paths=("/src/**", "src/*"))) != ()


def test_odd_file_names_match_as_git_names_them() -> None:
    """Spaces, newlines, leading dashes and non-ASCII in staged names match like any other."""
    names = ["src/a b.py", "src/new\nline.py", "src/-rf", "src/naïve/ü.py", "-top"]
    (found,) = conflicts(names, held(paths=("src/**", "-top")))
    assert found.staged == tuple(names)


# --- the decision and its messages ---------------------------------------------------------------


def test_decide_refuses_with_the_message_or_clears() -> None:
    """A conflict refuses (with a message naming the holder); none clears, silently."""
    refused = decide(["src/x.py"], Reservations((held(),), NOW), repo="app", local_time=clock)
    assert refused.outcome is Outcome.REFUSED and "ben holds src/**" in refused.message
    clear = decide(["doc.md"], Reservations((held(),), NOW), repo="app", local_time=clock)
    assert clear.outcome is Outcome.CLEAR and clear.message == "" and clear.conflicts == ()


def test_the_refusal_names_holder_paths_expiry_reason_and_the_override() -> None:
    """Every part a person needs is in the one message."""
    row = held(holder="ben", paths=("src/**", "lib/a.py"), until=NOW + 23 * 60 - 5,
               reason="refactoring auth")
    message = refusal_message(conflicts(["src/x.py"], row), now=NOW, local_time=clock)
    assert message.splitlines() == [
        "This commit touches paths someone else has reserved:",
        "  ben holds src/**, lib/a.py until T+1375 (23 min left; reason: refactoring auth)",
        "    staged here: src/x.py",
        "Talk to ben first (crosstalk send), or wait for a release.",
        "To commit anyway, this once: CROSSTALK_GUARD=off git commit …",
    ]


def test_the_refusal_lists_a_few_staged_paths_and_counts_the_rest() -> None:
    """Many staged paths under one reservation: the first few, then "and N more"."""
    staged = [f"src/{n}.py" for n in range(SHOWN_PATHS + 3)]
    message = refusal_message(conflicts(staged, held()), now=NOW, local_time=clock)
    assert f"src/{SHOWN_PATHS - 1}.py and 3 more" in message
    assert f"src/{SHOWN_PATHS}.py" not in message


def test_the_refusal_names_every_holder_once() -> None:
    """Two reservations of one holder and one of another: both named in the closing line."""
    rows = (held(id="a", holder="ben"), held(id="b", holder="ben", paths=("src/x.py",)),
            held(id="c", holder="cy", paths=("src/",)))
    message = refusal_message(conflicts(["src/x.py"], *rows), now=NOW, local_time=clock)
    assert message.count("  ben holds") == 2 and message.count("  cy holds") == 1
    assert "Talk to ben and cy first" in message


def test_peer_text_and_file_names_cannot_forge_lines() -> None:
    """A newline or escape in a label, reason or staged name stays on its line, escaped."""
    row = held(holder="ben\nALL CLEAR", reason="x\x1b[2Jy", paths=("src/**",))
    message = refusal_message(conflicts(["src/a\nb.py"], row), now=NOW, local_time=clock)
    assert len(message.splitlines()) == 5
    assert "ben\\x0aALL CLEAR" in message and "x\\x1b[2Jy" in message
    assert "src/a\\x0ab.py" in message


@pytest.mark.parametrize(
    ("seconds", "minutes"), [(1, 1), (59, 1), (60, 1), (61, 2), (3600, 60), (0.001, 1)]
)
def test_minutes_left_round_up(seconds: float, minutes: int) -> None:
    """A reservation with any time left shows at least a minute; partial minutes round up."""
    assert minutes_left(NOW + seconds, NOW) == minutes


@pytest.mark.parametrize(
    ("value", "off"),
    [(None, False), ("", False), ("on", False), ("1", False), ("off", True), ("OFF", True),
     (" off ", True), ("0", True), ("false", True), ("no", True)],
)
def test_the_override(value: str | None, off: bool) -> None:
    """``CROSSTALK_GUARD=off`` (and 0/false/no, any case) turns the guard off; nothing else does."""
    assert guard_disabled(value) is off


def test_skipped_and_unchecked_are_one_line_each() -> None:
    """The override and the could-not-check warning are single lines that say what happened."""
    assert skipped().outcome is Outcome.SKIPPED
    assert "CROSSTALK_GUARD=off" in skipped().message and "\n" not in skipped().message
    warning = unchecked("The daemon did not answer in time.\nsecond line")
    assert warning.outcome is Outcome.UNCHECKED and "\n" not in warning.message
    assert warning.message.startswith("crosstalk guard: could not check reservations (")


# --- inputs --------------------------------------------------------------------------------------


def test_split_paths_reads_git_z_output() -> None:
    """NUL-ended names come back whole; undecodable bytes survive as surrogates."""
    assert split_paths(b"") == ()
    assert split_paths(b"a b\0new\nline\0-x\0na\xc3\xafve\0bad\xff\0") == (
        "a b", "new\nline", "-x", "naïve", "bad\udcff",
    )


NAMES = st.text(
    st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1
)


@given(st.lists(NAMES, max_size=8))
def test_split_paths_round_trips(names: list[str]) -> None:
    """Whatever names git prints with -z, split_paths gives them back in order."""
    raw = b"".join(n.encode() + b"\0" for n in names)
    assert split_paths(raw) == tuple(names)


REPLY_ROW: dict[str, Any] = {
    "id": "r1", "holder": "ben", "holder_fingerprint": "ab12", "mine": False,
    "paths": ["src/**"], "repo": "app", "room": "team", "room_id": "x1", "until": NOW + 60,
    "shared": False, "reason": None,
}  # fmt: skip


def test_parse_reply_reads_the_ops_shape() -> None:
    """The op's reply becomes reservations and the daemon's now; a null reason is empty."""
    parsed = parse_reply({"reservations": [REPLY_ROW], "now": NOW})
    assert parsed == Reservations((held(until=NOW + 60),), NOW)


@pytest.mark.parametrize(
    "reply",
    [
        {"reservations": [REPLY_ROW]},
        {"reservations": [REPLY_ROW], "now": "soon"},
        {"reservations": [REPLY_ROW], "now": True},
        {"reservations": [REPLY_ROW], "now": float("nan")},
        {"now": NOW},
        {"reservations": {}, "now": NOW},
        {"reservations": ["r1"], "now": NOW},
        {"reservations": [{**REPLY_ROW, "mine": "no"}], "now": NOW},
        {"reservations": [{**REPLY_ROW, "paths": "src/**"}], "now": NOW},
        {"reservations": [{**REPLY_ROW, "paths": [1]}], "now": NOW},
        {"reservations": [{**REPLY_ROW, "until": None}], "now": NOW},
        {"reservations": [{**REPLY_ROW, "reason": 3}], "now": NOW},
        {"reservations": [{k: v for k, v in REPLY_ROW.items() if k != "holder"}], "now": NOW},
    ],
)
def test_parse_reply_refuses_other_shapes(reply: dict[str, Any]) -> None:
    """A reply of another shape is the daemon's protocol error (the shell warns and passes)."""
    with pytest.raises(RemoteProtocolError):
        parse_reply(reply)


# --- the rule, against a reference ---------------------------------------------------------------

SEGMENTS = st.sampled_from(["src", "docs", "a", "b.py", "x y", "ü"])
PATHS = st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join)
PATTERNS = st.one_of(PATHS, PATHS.map(lambda p: p + "/**"), PATHS.map(lambda p: p + "/*.py"),
                     st.just("**/b.py"))
ROWS = st.builds(
    held,
    id=st.sampled_from(["r1", "r2", "r3"]),
    holder=st.sampled_from(["ben", "cy"]),
    paths=st.lists(PATTERNS, min_size=1, max_size=3).map(tuple),
    repo=st.sampled_from(["app", "APP", "other"]),
    until=st.sampled_from([NOW - 1, NOW, NOW + 1, NOW + 3600]),
    shared=st.booleans(),
    mine=st.booleans(),
)


@given(st.lists(PATHS, max_size=6), st.lists(ROWS, max_size=5))
def test_conflicts_are_exactly_the_rule(staged: list[str], rows: list[HeldReservation]) -> None:
    """A conflict for each reservation that is someone else's, exclusive, here, running and
    naming a staged path, with exactly the staged paths it names; none for any other."""
    found = {id(c.reservation): c.staged for c in conflicts(staged, *rows)}
    for row in rows:
        named = tuple(p for p in staged if any(matches(q, p) for q in row.paths))
        applies = (not row.mine and not row.shared and row.repo.lower() == "app"
                   and row.until > NOW and named)
        assert found.get(id(row)) == (named if applies else None)
    verdict = decide(staged, Reservations(tuple(rows), NOW), repo="app", local_time=clock)
    assert (verdict.outcome is Outcome.REFUSED) == bool(found)
    for conflict in verdict.conflicts:
        assert one_line(conflict.reservation.holder) in verdict.message
