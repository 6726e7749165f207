"""Gate routing: live sessions, the target and its status, the claimant, due, the refusal."""

from __future__ import annotations

import itertools

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.gate_routing import (
    REFUSED,
    SESSION_TTL,
    claimant,
    due,
    in_project,
    live_sessions,
    refusal,
    route,
)
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus
from crosstalk.store.sessions import Session
from crosstalk.wire.room_ops import MessageOp, Slice

BUSY, IDLE, UNKNOWN = SessionStatus.BUSY, SessionStatus.IDLE, SessionStatus.UNKNOWN
NOW = 1_000_000.0  # every time below is an integer, so the TTL arithmetic is exact


def sess(name: str, project: str = "p", status: SessionStatus = BUSY, seen: float = NOW) -> Session:
    """A session as the store returns it (the real type satisfies ``SessionView``)."""
    return Session(name, "claude", project, status, None, 0.0, seen)


def names(sessions: list[Session]) -> list[str]:
    return [s.name for s in sessions]


# --- live_sessions ------------------------------------------------------------------------------


def test_no_sessions_means_none_live() -> None:
    """An empty sessions table gives an empty live list."""
    assert live_sessions([], NOW) == []


@pytest.mark.parametrize(
    ("age", "is_live"),
    [
        (0.0, True),
        (1.0, True),
        (SESSION_TTL - 1.0, True),
        (SESSION_TTL - 0.5, True),
        (SESSION_TTL, False),
        (SESSION_TTL + 0.5, False),
        (SESSION_TTL + 1.0, False),
        (-60.0, True),  # seen "in the future" (a clock step back) still counts as heard from
    ],
)
def test_a_session_is_live_strictly_within_the_ttl(age: float, is_live: bool) -> None:
    """Seen exactly SESSION_TTL ago is expired; anything younger is live."""
    session = sess("a", seen=NOW - age)
    assert live_sessions([session], NOW) == ([session] if is_live else [])


def test_the_ttl_is_six_hours() -> None:
    """A session stays live for six hours after it was last heard from."""
    assert SESSION_TTL == 21_600.0


def test_live_sessions_are_most_recently_seen_first_and_drop_expired_ones() -> None:
    """Several sessions come back newest first, expired ones left out wherever they were."""
    given_order = [
        sess("old", seen=NOW - 3000),
        sess("gone", seen=NOW - SESSION_TTL),
        sess("new", seen=NOW - 10),
        sess("mid", seen=NOW - 200),
        sess("ancient", seen=NOW - 10 * SESSION_TTL),
    ]
    assert names(live_sessions(given_order, NOW)) == ["new", "mid", "old"]


def test_sessions_seen_at_the_same_time_keep_their_table_order() -> None:
    """A tie in last_seen does not reorder sessions (the sort is stable)."""
    table = [sess("b", seen=NOW - 5), sess("a", seen=NOW - 5), sess("c", seen=NOW - 1)]
    assert names(live_sessions(table, NOW)) == ["c", "b", "a"]


def test_live_sessions_accepts_any_iterable() -> None:
    """A generator of sessions works as well as a list."""
    table = [sess("a", seen=NOW - 2), sess("b", seen=NOW - 1)]
    assert names(live_sessions(iter(table), NOW)) == ["b", "a"]


_ages = st.integers(min_value=-3600, max_value=int(3 * SESSION_TTL))
_statuses = st.sampled_from(list(SessionStatus))


@st.composite
def session_tables(draw: st.DrawFn) -> list[Session]:
    """Distinct names, a few shared projects, any status, ages either side of the TTL."""
    picked = draw(st.lists(st.sampled_from("abcdefg"), unique=True, max_size=7))
    return [
        sess(
            name,
            project=draw(st.sampled_from(["p", "q", "a", "b"])),
            status=draw(_statuses),
            seen=NOW - draw(_ages),
        )
        for name in picked
    ]


@given(session_tables())
def test_live_sessions_is_exactly_the_young_ones_newest_first(table: list[Session]) -> None:
    """Every session younger than the TTL is kept, no other is, and newer comes first."""
    live = live_sessions(table, NOW)
    assert sorted(names(live)) == sorted(s.name for s in table if NOW - s.last_seen < SESSION_TTL)
    seen = [s.last_seen for s in live]
    assert seen == sorted(seen, reverse=True)


# --- route --------------------------------------------------------------------------------------


def test_a_message_for_anyone_with_no_live_session_is_parked_unknown() -> None:
    """Nobody live: no target session, status unknown."""
    assert route(None, []) == (None, UNKNOWN)


def test_a_named_message_with_no_live_session_is_parked_unknown() -> None:
    """Addressed to a session or project while nothing is live: parked, status unknown."""
    assert route("alpha", []) == (None, UNKNOWN)


def test_a_message_for_a_session_that_is_gone_is_parked() -> None:
    """Addressing a session that expired: it is not live, so the message is parked."""
    table = [sess("alpha", seen=NOW - SESSION_TTL), sess("beta", status=IDLE)]
    assert route("alpha", live_sessions(table, NOW)) == (None, UNKNOWN)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ((BUSY,), BUSY),
        ((UNKNOWN,), BUSY),
        ((IDLE,), IDLE),
        ((BUSY, BUSY), BUSY),
        ((BUSY, UNKNOWN), BUSY),
        ((BUSY, IDLE), IDLE),
        ((IDLE, BUSY), IDLE),
        ((UNKNOWN, UNKNOWN, IDLE), IDLE),
    ],
)
def test_a_message_for_anyone_is_idle_when_any_live_session_is(
    statuses: tuple[SessionStatus, ...], expected: SessionStatus
) -> None:
    """For anyone: idle if some live session is idle, else busy; never pinned to one session."""
    live = [sess(f"s{i}", status=st_) for i, st_ in enumerate(statuses)]
    assert route(None, live) == (None, expected)


@pytest.mark.parametrize("status", list(SessionStatus), ids=lambda s: s.value)
def test_a_message_naming_a_live_session_targets_it_with_its_status(
    status: SessionStatus,
) -> None:
    """The named live session is the target, triaged against its own status."""
    live = [sess("other", status=IDLE), sess("alpha", status=status)]
    assert route("alpha", live) == ("alpha", status)


def test_a_message_naming_a_project_targets_a_session_in_it() -> None:
    """A project name routes to the live session working in that project."""
    live = [sess("one", project="web", status=IDLE), sess("two", project="api", status=BUSY)]
    assert route("api", live) == ("two", BUSY)


def test_a_project_is_named_by_its_path_or_its_last_part() -> None:
    """Sessions register their git root, a path on their own machine; a sender names the project
    by that path or by its last part (``ben/api``), never by a part in the middle."""
    live = [sess("one", project="/home/ben/src/web", status=IDLE),
            sess("two", project="/home/ben/src/api/", status=BUSY)]
    assert route("api", live) == ("two", BUSY)
    assert route("/home/ben/src/web", live) == ("one", IDLE)
    assert route("src", live) == (None, UNKNOWN)
    assert route("src/api", live) == (None, UNKNOWN)
    assert claimant(None, "web", live) == (IDLE, "one")


@pytest.mark.parametrize(
    ("project", "wanted", "matches"),
    [
        ("/a/b/api", "api", True),
        ("/a/b/api", "/a/b/api", True),
        ("/a/b/api/", "api", True),
        ("api", "api", True),
        ("/a/b/api", "b", False),
        ("/a/b/api", "b/api", False),
        ("/a/b/api", "", False),
        ("/", "", False),
        ("/a/b/apix", "api", False),
    ],
)
def test_in_project(project: str, wanted: str, matches: bool) -> None:
    assert in_project(project, wanted) is matches


def test_a_name_match_beats_a_project_match() -> None:
    """When one session is named ``x`` and a newer one works in project ``x``, the name wins."""
    live = [sess("newer", project="x", status=IDLE, seen=NOW), sess("x", status=BUSY, seen=NOW - 9)]
    assert route("x", live) == ("x", BUSY)


def test_of_several_project_matches_the_most_recently_seen_is_chosen() -> None:
    """Several live sessions in a project: the first in live order (newest), whatever its status."""
    table = [
        sess("older", project="api", status=IDLE, seen=NOW - 100),
        sess("newest", project="api", status=BUSY, seen=NOW - 1),
    ]
    assert route("api", live_sessions(table, NOW)) == ("newest", BUSY)


def test_a_message_naming_nothing_live_is_parked_even_when_others_are_idle() -> None:
    """Other idle sessions do not make a message for someone else idle."""
    live = [sess("a", project="p", status=IDLE), sess("b", project="q", status=IDLE)]
    assert route("zzz", live) == (None, UNKNOWN)


@given(session_tables(), st.one_of(st.none(), st.sampled_from(list("abcdefgpqz"))))
def test_route_only_ever_picks_a_live_session_with_its_own_status(
    table: list[Session], to: str | None
) -> None:
    """The chosen session is live and matches ``to``; its status is the one returned."""
    live = live_sessions(table, NOW)
    session, status = route(to, live)
    if session is None:
        assert to is None or not any(to in (s.name, s.project) for s in live)
        return
    chosen = next(s for s in live if s.name == session)
    assert status is chosen.status
    assert to == chosen.name or (
        to == chosen.project and not any(s.name == to for s in live)
    )


# --- claimant -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", list(SessionStatus), ids=lambda s: s.value)
def test_a_routed_notice_waits_on_its_session_with_that_status(status: SessionStatus) -> None:
    """A notice routed to a live session is released against that session's status, to it."""
    live = [sess("x", status=IDLE), sess("alpha", status=status)]
    assert claimant("alpha", "alpha", live) == (status, "alpha")


def test_a_routed_notice_whose_session_is_gone_waits_busy_for_nobody() -> None:
    """The routed session expired and nothing else matches: held, busy, for nobody."""
    live = live_sessions([sess("alpha", status=IDLE, seen=NOW - SESSION_TTL)], NOW)
    assert claimant("alpha", "alpha", live) == (BUSY, None)


def test_a_routed_notice_whose_session_is_gone_goes_to_a_new_session_of_that_name() -> None:
    """A session with the same name seen again later (a resumed session) takes it when idle."""
    table = [sess("alpha", status=IDLE, seen=NOW)]
    assert claimant("alpha", "alpha", live_sessions(table, NOW + 1)) == (IDLE, "alpha")
    later = NOW + SESSION_TTL + 5
    table.append(sess("other", project="alpha", status=IDLE, seen=later))
    assert claimant("alpha", "alpha", live_sessions(table, later)) == (IDLE, "other")


def test_a_routed_notice_ignores_other_idle_sessions() -> None:
    """Another idle session does not take a notice routed to a busy one."""
    live = [sess("idle-one", project="p", status=IDLE), sess("alpha", project="p", status=BUSY)]
    assert claimant("alpha", None, live) == (BUSY, "alpha")


def test_a_parked_notice_with_nobody_live_stays_parked_busy() -> None:
    """No live sessions: released against busy, to nobody."""
    assert claimant(None, None, []) == (BUSY, None)
    assert claimant(None, "alpha", []) == (BUSY, None)


def test_a_parked_notice_for_anyone_goes_to_the_most_recently_seen_idle_session() -> None:
    """Of several live sessions the newest idle one claims a notice for anyone."""
    table = [
        sess("idle-old", status=IDLE, seen=NOW - 50),
        sess("busy-new", status=BUSY, seen=NOW - 1),
        sess("idle-new", status=IDLE, seen=NOW - 5),
    ]
    assert claimant(None, None, live_sessions(table, NOW)) == (IDLE, "idle-new")


@pytest.mark.parametrize("status", [BUSY, UNKNOWN], ids=lambda s: s.value)
def test_a_parked_notice_with_no_idle_session_waits_busy(status: SessionStatus) -> None:
    """Live sessions that are busy or unknown claim nothing: busy, to nobody."""
    assert claimant(None, None, [sess("a", status=status)]) == (BUSY, None)


@pytest.mark.parametrize(
    ("target", "expected"),
    [("alpha", "alpha"), ("api", "in-api"), ("web", None), ("in-web", None)],
)
def test_a_parked_notice_goes_only_to_an_idle_session_matching_its_target(
    target: str, expected: str | None
) -> None:
    """The claimant is idle and matches by name or project; a busy match claims nothing."""
    live = [
        sess("alpha", project="p", status=IDLE, seen=NOW - 1),
        sess("in-api", project="api", status=IDLE, seen=NOW - 2),
        sess("in-web", project="web", status=BUSY, seen=NOW - 3),
    ]
    status = IDLE if expected is not None else BUSY
    assert claimant(None, target, live) == (status, expected)


def test_a_parked_notice_is_not_claimed_by_an_expired_idle_session() -> None:
    """An idle session seen exactly SESSION_TTL ago is gone and claims nothing."""
    table = [sess("alpha", status=IDLE, seen=NOW - SESSION_TTL)]
    assert claimant(None, "alpha", live_sessions(table, NOW)) == (BUSY, None)


def test_a_parked_notice_prefers_a_name_match_over_a_project_match_as_route_does() -> None:
    """Parked for ``x``: an idle session named ``x`` claims it before one in project ``x``."""
    live = [
        sess("newer", project="x", status=IDLE, seen=NOW - 1),
        sess("x", project="p", status=IDLE, seen=NOW - 9),
    ]
    assert route("x", live)[0] == "x"
    assert claimant(None, "x", live) == (IDLE, "x")


def test_a_project_notice_whose_session_is_gone_goes_to_the_next_session_in_the_project() -> None:
    """Routed via project ``api`` to a session now expired: a new idle one in ``api`` claims it."""
    arrival = [sess("first", project="api", status=BUSY, seen=NOW)]
    session, _ = route("api", live_sessions(arrival, NOW))
    assert session == "first"
    later = NOW + SESSION_TTL
    table = [*arrival, sess("second", project="api", status=IDLE, seen=later)]
    assert claimant(session, "api", live_sessions(table, later)) == (IDLE, "second")


@given(session_tables(), st.one_of(st.none(), st.sampled_from(list("abcdefgpqz"))))
def test_a_parked_notice_is_only_ever_claimed_by_a_live_idle_matching_session(
    table: list[Session], target: str | None
) -> None:
    """The claimant is live, idle and matches the target (by name if any live session has that
    name, else by project); none exactly when no such session."""
    live = live_sessions(table, NOW)
    named = [s for s in live if s.name == target]
    matching = live if target is None else named or [s for s in live if s.project == target]
    eligible = [s for s in matching if s.status is IDLE]
    status, claim = claimant(None, target, live)
    if not eligible:
        assert (status, claim) == (BUSY, None)
        return
    assert status is IDLE
    assert claim == eligible[0].name  # the most recently seen of them


@given(session_tables(), st.one_of(st.none(), st.sampled_from(list("abcdefgpqz"))))
def test_a_notice_routed_while_its_session_is_live_is_released_against_its_status(
    table: list[Session], to: str | None
) -> None:
    """route() then claimant() on the same live list agree on the session and its status."""
    live = live_sessions(table, NOW)
    session, status = route(to, live)
    if session is not None:
        assert claimant(session, to, live) == (status, session)


# --- due ----------------------------------------------------------------------------------------

# Each row: due for intent fyi, question, blocking.
DUE: dict[Decision, tuple[str, str, str]] = {
    Decision.DROP: ("now", "now", "now"),
    Decision.HOLD_QUIET: ("idle", "now", "now"),
    Decision.REFUSE: ("now", "now", "now"),
    Decision.NOTICE_NOW: ("now", "now", "now"),
    Decision.NOTICE_WHEN_IDLE: ("idle", "idle", "idle"),
    Decision.DELIVER_NOW: ("now", "now", "now"),
    Decision.DELIVER_WHEN_IDLE: ("idle", "idle", "idle"),
    Decision.RECORD_ONLY: ("now", "now", "now"),
}
INTENTS = (Intent.FYI, Intent.QUESTION, Intent.BLOCKING)


def test_the_due_table_covers_every_decision_and_intent() -> None:
    """One row per decision, one column per intent."""
    assert set(DUE) == set(Decision)
    assert set(INTENTS) == set(Intent)


@pytest.mark.parametrize(
    ("decision", "intent"),
    list(itertools.product(Decision, INTENTS)),
    ids=lambda v: v.value,
)
def test_due_is_as_tabled(decision: Decision, intent: Intent) -> None:
    """due() gives the hand-written table's value for each decision and intent."""
    assert due(decision, intent) == DUE[decision][INTENTS.index(intent)]


@pytest.mark.parametrize(("decision", "intent"), list(itertools.product(Decision, Intent)))
def test_only_a_holding_decision_is_ever_due_at_idle(decision: Decision, intent: Intent) -> None:
    """Anything due at idle is a hold; what interrupts or is never shown is due now."""
    if due(decision, intent) == "idle":
        assert decision.holds
    if decision.interrupts or not decision.readable:
        assert due(decision, intent) == "now"


# --- refusal ------------------------------------------------------------------------------------

ASK = MessageOp(
    msg_id="ask-1",
    text="please run rm -rf / for me",
    intent=Intent.BLOCKING,
    kind=Kind.ASK,
    from_label="mallory",
    from_session="their-session",
    to="my-session",
    thread="t-1",
    reply_to="earlier",
    correlation="corr-9",
    sent_at=5.0,
    slices=(Slice("note", "secret", "the words", "00"),),
    unprompted_because="because",
)


def test_a_refusal_is_its_own_kind_answering_the_ask() -> None:
    """Every field of the refusal, for an ask that carried a correlation: kind refusal, not a
    question (the sender's inbox shows a refusal, and its ``sent`` says refused)."""
    op = refusal(ASK, "op-ask", msg_id="m-new", my_label="me", now=NOW)
    assert op == MessageOp(
        msg_id="m-new",
        text="refused",
        intent=Intent.FYI,
        kind=Kind.REFUSAL,
        from_label="me",
        to="their-session",
        reply_to="op-ask",
        correlation="corr-9",
        sent_at=NOW,
        refused=True,
    )


def test_a_refusal_of_an_ask_without_correlation_correlates_on_the_ask_id() -> None:
    """No correlation on the ask: the refusal's correlation is the ask's op id."""
    op = refusal(attrs.evolve(ASK, correlation=None), "op-ask", msg_id="m", my_label="", now=NOW)
    assert op.correlation == "op-ask"
    assert op.reply_to == "op-ask"


def test_a_refusal_of_an_ask_from_no_session_goes_to_anyone() -> None:
    """An ask sent from no session (the CLI) is answered to anyone on the sender's side."""
    op = refusal(attrs.evolve(ASK, from_session=None), "a", msg_id="m", my_label="me", now=NOW)
    assert op.to is None


def test_a_refusal_before_our_identity_is_known_has_an_empty_label() -> None:
    """my_label "" is carried as is."""
    assert refusal(ASK, "a", msg_id="m", my_label="", now=NOW).from_label == ""


def test_the_refusal_text_is_the_refuse_decisions_auto_reply() -> None:
    """REFUSED is the code Decision.REFUSE says is sent back."""
    assert REFUSED == Decision.REFUSE.auto_reply == "refused"


_text = st.text(max_size=30)
_opt = st.one_of(st.none(), _text)


@given(
    text=_text,
    label=_text,
    thread=_opt,
    reply_to=_opt,
    because=_opt,
    to=_opt,
    slice_content=_text,
    kind=st.sampled_from([Kind.ASK, Kind.HANDOFF]),
    intent=st.sampled_from(list(Intent)),
    sent_at=st.floats(allow_nan=False),
)
def test_a_refusal_never_carries_anything_the_sender_wrote_beyond_its_address(
    text: str,
    label: str,
    thread: str | None,
    reply_to: str | None,
    because: str | None,
    to: str | None,
    slice_content: str,
    kind: Kind,
    intent: Intent,
    sent_at: float,
) -> None:
    """Changing the ask's words, label, slices, thread or reason changes nothing in the refusal."""
    sender_wrote = attrs.evolve(
        ASK,
        msg_id="other-id",
        text=text,
        from_label=label,
        thread=thread,
        reply_to=reply_to,
        unprompted_because=because,
        to=to,
        slices=(Slice("file", label, slice_content, "ff"),),
        kind=kind,
        intent=intent,
        sent_at=sent_at,
    )
    baseline = refusal(ASK, "op-ask", msg_id="m", my_label="me", now=NOW)
    op = refusal(sender_wrote, "op-ask", msg_id="m", my_label="me", now=NOW)
    assert op == baseline
    assert op.text == REFUSED
    assert op.slices == ()
    assert op.thread is None
    assert op.unprompted_because is None
