"""ReservationBook: the reserve, renew and release rules, lapsing by relay time, snapshots,
and the wire models' bounds."""

from __future__ import annotations

import json
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.reservations import (
    MAX_ACTIVE_PER_HOLDER,
    ReservationBook,
    canonical_bytes,
    describe_conflict,
)
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire.converter import converter, structure_remote
from crosstalk.wire.memory import OP_TAGS, MemoryOp, Person, parse_memory_op
from crosstalk.wire.reservations import (
    MAX_PATTERN_LENGTH,
    MAX_PATTERNS,
    MAX_REASON_LENGTH,
    RESERVATION_OP_TAGS,
    ReleaseOp,
    RenewOp,
    Reservation,
    ReservationCode,
    ReservationOp,
    ReservationOutcome,
    ReservationSnapshot,
    ReserveOp,
    parse_reservation_op,
)

MARIE = Person("aaaa-aaaa-aaaa-aaaa", "marie")
JO = Person("bbbb-bbbb-bbbb-bbbb", "jo")
KIM = Person("cccc-cccc-cccc-cccc", "kim")
LEE = Person("dddd-dddd-dddd-dddd", "lee")
SAM = Person("eeee-eeee-eeee-eeee", "sam")
T0 = 1_800_000_000.0
MINUTE = 60.0
REPO = "crosstalk"


@attrs.frozen
class Entry:
    """One place in a fake room log: a reservation op, or someone leaving (``op`` None)."""

    seq: int
    relay_ts: float
    who: Person
    op: ReservationOp | None
    op_id: str


class Log:
    """A fake room log: like the relay, it gives every entry the next sequence number and its
    own timestamp. Other ops (messages…) take seqs too, which the book never sees."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._seq = 0

    def add(
        self, who: Person, op: ReservationOp, *, ts: float = T0, op_id: str | None = None
    ) -> Entry:
        self._seq += 1
        entry = Entry(self._seq, ts, who, op, op_id or f"op-{self._seq}")
        self.entries.append(entry)
        return entry

    def left(self, who: Person, *, ts: float = T0) -> Entry:
        self._seq += 1
        entry = Entry(self._seq, ts, who, None, f"left-{self._seq}")
        self.entries.append(entry)
        return entry

    def other(self) -> None:
        """A message or any op that is not a reservation: a seq the book never hears of."""
        self._seq += 1

    def feed(
        self, book: ReservationBook, start: int = 0, stop: int | None = None
    ) -> list[ReservationOutcome]:
        outcomes = []
        for entry in self.entries[start:stop]:
            outcome = feed_one(book, entry)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes


def feed_one(book: ReservationBook, entry: Entry) -> ReservationOutcome | None:
    if entry.op is None:
        book.member_left(entry.who.fingerprint, seq=entry.seq, relay_ts=entry.relay_ts)
        return None
    return book.apply(
        entry.op, sender=entry.who, seq=entry.seq, relay_ts=entry.relay_ts, op_id=entry.op_id
    )


class Room:
    """One replica fed live: every entry is sequenced and applied at once."""

    def __init__(self) -> None:
        self.log = Log()
        self.book = ReservationBook("room-1")

    def do(
        self, who: Person, op: ReservationOp, *, ts: float = T0, op_id: str | None = None
    ) -> ReservationOutcome:
        outcome = feed_one(self.book, self.log.add(who, op, ts=ts, op_id=op_id))
        assert outcome is not None
        return outcome

    def left(self, who: Person, *, ts: float = T0) -> tuple[str, ...]:
        entry = self.log.left(who, ts=ts)
        return self.book.member_left(who.fingerprint, seq=entry.seq, relay_ts=ts)


def reserve(rid: str, *patterns: str, shared: bool = False, minutes: int = 60,
            reason: str = "", repo: str = REPO) -> ReserveOp:
    return ReserveOp(rid, repo, patterns, shared=shared, minutes=minutes, reason=reason)


def holders(book: ReservationBook, now: float = T0) -> list[tuple[str, str]]:
    return [(r.reservation_id, r.holder.label) for r in book.active(now)]


# --- wire models -------------------------------------------------------------------------------

PATTERNS = st.lists(st.sampled_from(["src/**", "docs/a.md", "**/*.py", "app/[slug]"]),
                    min_size=1, max_size=3).map(tuple)
OPS: st.SearchStrategy[ReservationOp] = st.one_of(
    st.builds(ReserveOp, st.sampled_from(["r1", "r2"]), st.just(REPO), PATTERNS,
              shared=st.booleans(), minutes=st.integers(1, 1440), reason=st.text(max_size=20)),
    st.builds(RenewOp, st.sampled_from(["r1", "r2"]), minutes=st.integers(1, 1440)),
    st.builds(ReleaseOp, st.lists(st.sampled_from(["r1", "r2"]), max_size=2).map(tuple)),
    st.builds(ReleaseOp, repo=st.just(REPO), patterns=PATTERNS),
)


@given(op=OPS)
def test_ops_round_trip_through_the_wire(op: ReservationOp) -> None:
    """Every op survives JSON and comes back equal, tagged under "op"."""
    data = json.loads(json.dumps(converter.unstructure(op, ReservationOp)))
    assert data["op"] == RESERVATION_OP_TAGS[type(op)]
    assert parse_reservation_op(data) == op


def test_reservation_ops_travel_as_memory_ops_under_their_own_tags() -> None:
    """They joined the memory union without changing how any memory op is encoded."""
    memory_only = {t: tag for t, tag in OP_TAGS.items() if t not in RESERVATION_OP_TAGS}
    assert not set(RESERVATION_OP_TAGS.values()) & set(memory_only.values())
    assert all(OP_TAGS[t] == tag for t, tag in RESERVATION_OP_TAGS.items())
    op = ReserveOp("r1", "repo", ("src/**",))
    assert parse_memory_op(converter.unstructure(op, MemoryOp)) == op


TOO_BIG = [
    ({"minutes": 0}, "1 to 1440 minutes"),
    ({"minutes": 1441}, "1 to 1440 minutes"),
    ({"patterns": []}, "at least one path"),
    ({"patterns": ["a"] * (MAX_PATTERNS + 1)}, f"at most {MAX_PATTERNS} paths"),
    ({"patterns": ["a" * (MAX_PATTERN_LENGTH + 1)]}, f"1 to {MAX_PATTERN_LENGTH} characters"),
    ({"reason": "x" * (MAX_REASON_LENGTH + 1)}, f"at most {MAX_REASON_LENGTH} characters"),
    ({"reservation_id": ""}, "reservation_id must be 1 to"),
    ({"repo": " "}, "repository name"),
]


@pytest.mark.parametrize(("change", "message"), TOO_BIG)
def test_out_of_bounds_reserves_are_refused_with_a_clear_error(
    change: dict[str, object], message: str
) -> None:
    """From a peer: one RemoteProtocolError that says which bound."""
    data = {**converter.unstructure(reserve("r1", "src/**"), ReservationOp), **change}
    with pytest.raises(RemoteProtocolError, match=message):
        parse_reservation_op(data)


def test_sizes_at_their_bounds_are_accepted() -> None:
    """The limits are inclusive."""
    op = ReserveOp("r" * 64, REPO, ["a" * MAX_PATTERN_LENGTH] * MAX_PATTERNS, minutes=1440,
                   reason="x" * MAX_REASON_LENGTH)
    assert parse_reservation_op(converter.unstructure(op, ReservationOp)) == op
    assert ReserveOp("r1", REPO, ["a"], minutes=1).minutes == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reservation_ids": ("r1",), "repo": REPO, "patterns": ("a",)}, "not both"),
        ({"patterns": ("a",)}, "needs the repository"),
        ({"reservation_ids": ("",)}, "1 to 64 characters"),
    ],
)
def test_a_malformed_release_is_refused(kwargs: dict[str, object], message: str) -> None:
    """Release names ids or paths (with their repository), never both."""
    with pytest.raises(ValueError, match=message):
        ReleaseOp(**kwargs)  # type: ignore[arg-type]


# --- reserve -----------------------------------------------------------------------------------


def test_a_reserve_is_granted_until_its_minutes_after_the_relay_time() -> None:
    """until = relay_ts + minutes*60; the reservation names its holder, paths and reason."""
    room = Room()
    outcome = room.do(MARIE, reserve("r1", "src/auth/**", minutes=30, reason="login refactor"),
                      ts=T0 + 5)
    assert outcome.code is ReservationCode.GRANTED
    assert outcome.reservation_id == "r1" and outcome.until == T0 + 5 + 30 * MINUTE
    held = room.book.reservation("r1")
    assert held is not None
    assert (held.holder, held.patterns, held.reason, held.shared) == (
        MARIE, ("src/auth/**",), "login refactor", False)


def test_an_overlapping_exclusive_reserve_is_refused_naming_the_holder() -> None:
    """The conflict says who holds what, until when, why, and which of ours collided."""
    room = Room()
    room.do(JO, reserve("r1", "docs/**", "src/auth/**", reason="token rotation"))
    outcome = room.do(MARIE, reserve("r2", "README.md", "src/**/*.py"), ts=T0 + 60)
    assert outcome.code is ReservationCode.REFUSED
    conflict = outcome.conflict
    assert conflict is not None
    assert (conflict.holder, conflict.reservation_id, conflict.pattern, conflict.wanted) == (
        JO, "r1", "src/auth/**", "src/**/*.py")
    assert (conflict.until, conflict.reason, conflict.shared) == (
        T0 + 60 * MINUTE, "token rotation", False)
    assert room.book.reservation("r2") is None


@pytest.mark.parametrize(
    ("first_shared", "second_shared", "granted"),
    [(True, True, True), (True, False, False), (False, True, False), (False, False, False)],
)
def test_shared_conflicts_only_with_exclusive(
    first_shared: bool, second_shared: bool, granted: bool
) -> None:
    """Two shared reservations coexist; any pair with an exclusive one collides."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", shared=first_shared))
    outcome = room.do(MARIE, reserve("r2", "src/a.py", shared=second_shared))
    expected = ReservationCode.GRANTED if granted else ReservationCode.REFUSED
    assert outcome.code is expected
    if not granted:
        assert outcome.conflict is not None and outcome.conflict.shared is first_shared


def test_disjoint_paths_and_other_repositories_coexist() -> None:
    """No common path, or another repository: no conflict. Repository names ignore case."""
    room = Room()
    room.do(JO, reserve("r1", "src/*.py"))
    assert room.do(MARIE, reserve("r2", "src/auth/login.py")).code is ReservationCode.GRANTED
    assert room.do(MARIE, reserve("r3", "src/*.py", repo="website")).code is (
        ReservationCode.GRANTED)
    assert room.do(KIM, reserve("r4", "src/a.py", repo="CrossTalk")).code is (
        ReservationCode.REFUSED)


def test_the_same_holder_may_overlap_their_own_reservations() -> None:
    """Widening or narrowing one's own claim is not a conflict."""
    room = Room()
    room.do(MARIE, reserve("r1", "src/**"))
    assert room.do(MARIE, reserve("r2", "src/a.py", shared=True)).code is ReservationCode.GRANTED
    assert holders(room.book) == [("r1", "marie"), ("r2", "marie")]


def test_a_pattern_git_would_not_read_is_invalid_everywhere() -> None:
    """Every replica refuses it alike, with the parser's reason."""
    room = Room()
    outcome = room.do(MARIE, reserve("r1", "src/ok.py", "../etc/passwd"))
    assert outcome.code is ReservationCode.INVALID and "'..'" in outcome.detail
    assert room.book.active(T0) == []


def test_an_id_used_before_cannot_be_reserved_again() -> None:
    """Even after release, a new reserve under an old id is ALREADY_EXISTS."""
    room = Room()
    room.do(MARIE, reserve("r1", "src/**"))
    room.do(MARIE, ReleaseOp(("r1",)))
    assert room.do(JO, reserve("r1", "docs/**")).code is ReservationCode.ALREADY_EXISTS
    assert room.book.reservation("r1") is None


def test_a_holder_has_a_bounded_number_of_reservations() -> None:
    """Past the limit, OVER_LIMIT; giving one back makes room."""
    room = Room()
    for i in range(MAX_ACTIVE_PER_HOLDER):
        assert room.do(MARIE, reserve(f"r{i}", f"f{i}.py")).code is ReservationCode.GRANTED
    assert room.do(MARIE, reserve("extra", "g.py")).code is ReservationCode.OVER_LIMIT
    assert room.do(JO, reserve("jo", "g.py")).code is ReservationCode.GRANTED
    room.do(MARIE, ReleaseOp(("r0",)))
    assert room.do(MARIE, reserve("again", "h.py")).code is ReservationCode.GRANTED


# --- time --------------------------------------------------------------------------------------


def test_a_reservation_lapses_at_exactly_its_until() -> None:
    """Held at until - 1 ms (a conflicting op then is refused), gone at until (granted)."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=10))
    until = T0 + 10 * MINUTE
    assert [r.reservation_id for r in room.book.active(until - 0.001)] == ["r1"]
    assert room.book.active(until) == []
    assert room.do(MARIE, reserve("r2", "src/a.py"), ts=until - 0.001).code is (
        ReservationCode.REFUSED)
    assert room.do(MARIE, reserve("r3", "src/a.py"), ts=until).code is ReservationCode.GRANTED
    assert room.book.reservation("r1") is None


def test_renewal_counts_from_the_renewing_op() -> None:
    """A renew sets until = its relay_ts + minutes*60: later, or sooner."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=10))
    renewed = room.do(JO, RenewOp("r1", minutes=60), ts=T0 + 9 * MINUTE)
    assert renewed.code is ReservationCode.RENEWED and renewed.until == T0 + 69 * MINUTE
    assert room.do(MARIE, reserve("r2", "src/a.py"), ts=T0 + 30 * MINUTE).code is (
        ReservationCode.REFUSED)
    shortened = room.do(JO, RenewOp("r1", minutes=5), ts=T0 + 31 * MINUTE)
    assert shortened.until == T0 + 36 * MINUTE
    assert room.do(MARIE, reserve("r3", "src/a.py"), ts=T0 + 36 * MINUTE).code is (
        ReservationCode.GRANTED)


def test_a_lapsed_released_or_unknown_reservation_cannot_be_renewed() -> None:
    """Renewal keeps a live reservation; it does not revive one (reserve again for that)."""
    room = Room()
    room.do(JO, reserve("r1", "a.py", minutes=1))
    room.do(JO, reserve("r2", "b.py"))
    room.do(JO, ReleaseOp(("r2",)))
    for rid in ("r1", "r2", "nope"):
        assert room.do(JO, RenewOp(rid), ts=T0 + MINUTE).code is ReservationCode.NOT_FOUND


def test_a_relay_clock_stepping_back_revives_nothing() -> None:
    """The book's clock is the largest relay time seen: a lapse is final."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=10))
    room.do(KIM, reserve("k", "docs/x"), ts=T0 + 11 * MINUTE)
    assert room.book.clock == T0 + 11 * MINUTE
    late = room.do(MARIE, reserve("r2", "src/a.py"), ts=T0 + 5 * MINUTE)
    assert late.code is ReservationCode.GRANTED
    assert room.book.clock == T0 + 11 * MINUTE


def test_active_is_judged_at_the_relay_time_it_is_given() -> None:
    """No local clock: the caller's relay time decides what is shown."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=60))
    assert holders(room.book, T0 + 59 * MINUTE) == [("r1", "jo")]
    assert holders(room.book, T0 + 61 * MINUTE) == []
    assert room.book.reservation("r1") is not None  # still in the book until the log moves on


# --- renew and release by others, release forms ------------------------------------------------


def test_only_the_holder_renews_or_releases() -> None:
    """Someone else's renew or release is NOT_HOLDER, naming the holder, and changes nothing."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=10))
    renew = room.do(MARIE, RenewOp("r1", minutes=600))
    release = room.do(MARIE, ReleaseOp(("r1",)))
    assert (renew.code, renew.holder) == (ReservationCode.NOT_HOLDER, JO)
    assert (release.code, release.holder) == (ReservationCode.NOT_HOLDER, JO)
    held = room.book.reservation("r1")
    assert held is not None and held.until == T0 + 10 * MINUTE


def test_release_by_id_gives_back_only_ones_own() -> None:
    """Ids of other people's reservations in the same op are left alone."""
    room = Room()
    room.do(JO, reserve("j1", "docs/**"))
    room.do(MARIE, reserve("m1", "src/**"))
    outcome = room.do(MARIE, ReleaseOp(("m1", "j1")))
    assert (outcome.code, outcome.released) == (ReservationCode.RELEASED, ("m1",))
    assert holders(room.book) == [("j1", "jo")]


def test_release_by_pattern_gives_back_ones_overlapping_reservations_in_that_repo() -> None:
    """Every one of the sender's reservations there that shares a path with a pattern given."""
    room = Room()
    room.do(JO, reserve("j1", "tests/**"))
    room.do(MARIE, reserve("m1", "src/auth/**"))
    room.do(MARIE, reserve("m2", "src/*.py"))
    room.do(MARIE, reserve("m3", "docs/**"))
    room.do(MARIE, reserve("w1", "src/auth/**", repo="website"))
    given = ("src/auth/login.py", "src/a.py", "tests/x.py")
    outcome = room.do(MARIE, ReleaseOp(repo=REPO, patterns=given))
    assert outcome.released == ("m1", "m2")
    assert holders(room.book) == [("j1", "jo"), ("m3", "marie"), ("w1", "marie")]


def test_release_with_no_names_gives_back_all_of_ones_own() -> None:
    """In one repository if it is named, else everywhere in the room."""
    room = Room()
    room.do(MARIE, reserve("m1", "a.py"))
    room.do(MARIE, reserve("m2", "a.py", repo="website"))
    room.do(JO, reserve("j1", "b.py"))
    assert room.do(MARIE, ReleaseOp(repo="website")).released == ("m2",)
    assert room.do(MARIE, ReleaseOp()).released == ("m1",)
    assert room.do(MARIE, ReleaseOp()).code is ReservationCode.NOT_FOUND
    assert holders(room.book) == [("j1", "jo")]


def test_release_by_a_malformed_pattern_is_invalid() -> None:
    """Nothing is released by a pattern that does not parse."""
    room = Room()
    room.do(MARIE, reserve("m1", "a.py"))
    outcome = room.do(MARIE, ReleaseOp(repo=REPO, patterns=("/a.py",)))
    assert outcome.code is ReservationCode.INVALID
    assert holders(room.book) == [("m1", "marie")]


# --- members leaving ---------------------------------------------------------------------------


def test_a_member_who_leaves_loses_their_reservations() -> None:
    """At the seq of the departure, everywhere; the paths are free for the next reserve."""
    room = Room()
    room.do(JO, reserve("j1", "src/**"))
    room.do(JO, reserve("j2", "docs/**"))
    room.do(KIM, reserve("k1", "tests/**"))
    assert room.left(JO) == ("j1", "j2")
    assert holders(room.book) == [("k1", "kim")]
    assert room.do(MARIE, reserve("m1", "src/a.py")).code is ReservationCode.GRANTED


def test_a_departure_redelivered_at_an_old_seq_changes_nothing() -> None:
    """Someone who left and came back keeps what they reserved since."""
    room = Room()
    gone = room.log.left(JO)
    room.book.member_left(JO.fingerprint, seq=gone.seq, relay_ts=T0)
    room.do(JO, reserve("j1", "src/**"))
    assert room.book.member_left(JO.fingerprint, seq=gone.seq, relay_ts=T0) == ()
    assert holders(room.book) == [("j1", "jo")]


# --- sequencing and idempotency ----------------------------------------------------------------


def test_an_op_applied_again_returns_its_outcome_and_changes_nothing() -> None:
    """Redelivered at its seq, or sequenced again later (a retried send): same outcome, no
    second effect (a renew does not extend twice)."""
    room = Room()
    room.do(JO, reserve("r1", "src/**", minutes=10))
    first = room.do(JO, RenewOp("r1", minutes=10), ts=T0 + 5 * MINUTE, op_id="renew-1")
    before = room.book.state_hash()
    entry = room.log.entries[-1]
    again = feed_one(room.book, entry)
    assert again == attrs.evolve(first, duplicate=True)
    later = room.do(JO, RenewOp("r1", minutes=10), ts=T0 + 9 * MINUTE, op_id="renew-1")
    assert later.until == T0 + 15 * MINUTE and later.duplicate
    held = room.book.reservation("r1")
    assert held is not None and held.until == T0 + 15 * MINUTE
    assert room.book.last_seq == 3
    assert room.book.state_hash() != before  # only the cursor and clock moved
    assert room.book.snapshot().reservations == (held,)


def test_a_new_op_at_a_passed_seq_raises_and_changes_nothing() -> None:
    """That is the caller's ordering bug."""
    room = Room()
    room.do(JO, reserve("r1", "src/**"))
    room.do(JO, reserve("r2", "docs/**"))
    before = room.book.state_hash()
    with pytest.raises(LocalProtocolError, match="seq 1 arrived after seq 2"):
        room.book.apply(reserve("r3", "x"), sender=MARIE, seq=1, relay_ts=T0, op_id="new")
    with pytest.raises(LocalProtocolError, match="not a time"):
        room.book.apply(reserve("r3", "x"), sender=MARIE, seq=9, relay_ts=float("nan"),
                        op_id="new")
    assert room.book.state_hash() == before


def test_seqs_of_other_ops_may_be_skipped() -> None:
    """Messages between reservation ops take seqs the book never hears of."""
    room = Room()
    room.log.other()
    room.log.other()
    assert room.do(JO, reserve("r1", "a.py")).code is ReservationCode.GRANTED
    assert room.book.last_seq == 3


# --- telling people ----------------------------------------------------------------------------


def test_a_refusal_reads_as_one_sentence_naming_holder_paths_time_and_reason() -> None:
    """What the CLI prints with code ``reserved``."""
    room = Room()
    room.do(JO, reserve("r1", "src/auth/**", reason="token rotation"))
    conflict = room.do(MARIE, reserve("r2", "src/auth/login.py")).conflict
    assert conflict is not None
    text = describe_conflict(conflict, now_ts=T0 + 18 * MINUTE)
    assert text == ("jo holds src/auth/** exclusively for 42 more minutes (token rotation), "
                    "which overlaps src/auth/login.py.")
    room.do(KIM, reserve("k1", "docs/**", shared=True, minutes=2))
    shared = room.do(MARIE, reserve("m1", "docs/a.md")).conflict
    assert shared is not None
    assert describe_conflict(shared, now_ts=T0 + 61) == (
        "kim holds docs/** shared for 1 more minute, which overlaps docs/a.md.")


def test_conflicts_lists_every_holder_a_path_would_meet() -> None:
    """The guard's question: who holds this path, as of a relay time."""
    room = Room()
    room.do(JO, reserve("j1", "src/**", shared=True))
    room.do(KIM, reserve("k1", "src/*.py", shared=True, minutes=5))
    room.do(MARIE, reserve("m1", "docs/**"))
    wanted = Reservation("probe", REPO, ("src/a.py",), False, MARIE, "", 0, T0, T0 + 1)
    assert [c.holder for c in room.book.conflicts(wanted, now_ts=T0)] == [JO, KIM]
    assert [c.holder for c in room.book.conflicts(wanted, now_ts=T0 + 5 * MINUTE)] == [JO]


# --- snapshots ---------------------------------------------------------------------------------


def _busy_room() -> Room:
    room = Room()
    room.do(JO, reserve("j1", "src/**", reason="why"))
    room.do(MARIE, reserve("m1", "src/a.py"))
    room.do(MARIE, reserve("m2", "docs/**", shared=True, minutes=5))
    room.do(KIM, RenewOp("j1"))
    return room


def test_a_snapshot_through_json_continues_like_the_original() -> None:
    """Restored from its canonical JSON, a book equals its donor and takes the next ops alike."""
    room = _busy_room()
    wire = json.loads(canonical_bytes(room.book.snapshot()))
    restored = ReservationBook.from_snapshot(structure_remote(wire, ReservationSnapshot))
    assert restored.state_hash() == room.book.state_hash()
    nxt = room.log.add(MARIE, reserve("m1", "elsewhere"), ts=T0 + 10 * MINUTE)
    assert feed_one(restored, nxt) == feed_one(room.book, nxt)
    assert restored.state_hash() == room.book.state_hash()
    assert restored.outcome_of("op-2") == room.book.outcome_of("op-2")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: attrs.evolve(s, version=2), "version 2"),
        (lambda s: attrs.evolve(s, reservations=s.reservations * 2), "twice"),
        (lambda s: attrs.evolve(s, outcomes=s.outcomes * 2), "twice"),
        (lambda s: attrs.evolve(s, last_seq=1), "after its last_seq"),
        (lambda s: attrs.evolve(s, clock=T0 + 3600 * 24), "lapsed before its clock"),
        (lambda s: attrs.evolve(s, clock=float("inf")), "bad clock"),
    ],
)
def test_a_snapshot_that_contradicts_itself_is_refused(
    change: Callable[[ReservationSnapshot], ReservationSnapshot], message: str
) -> None:
    """Nothing of a self-contradicting snapshot is adopted."""
    snapshot = _busy_room().book.snapshot()
    with pytest.raises(RemoteProtocolError, match=message):
        ReservationBook.from_snapshot(change(snapshot))
