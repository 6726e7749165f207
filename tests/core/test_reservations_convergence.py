"""Convergence and the one-winner invariant: replicas of one log agree, whatever the log, and
never let two people hold one path where either holds it exclusively."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from crosstalk.core.pathspec import overlaps
from crosstalk.core.reservations import ReservationBook, canonical_bytes
from crosstalk.wire.converter import structure_remote
from crosstalk.wire.memory import Person
from crosstalk.wire.reservations import (
    Conflict,
    ReleaseOp,
    RenewOp,
    Reservation,
    ReservationCode,
    ReservationOp,
    ReservationSnapshot,
    ReserveOp,
)
from tests.core.test_reservations import JO, KIM, LEE, MARIE, MINUTE, REPO, SAM, T0, Log, feed_one

EVERYONE = [MARIE, JO, KIM, LEE, SAM]
GLOBS = ["src/**", "src/*.py", "src/a.py", "**/*.py", "docs", "docs/*.md", "src/auth/**",
         "*.md", "tests/[ab]*.py", "**/a.py"]
IDS = [f"r{i}" for i in range(6)]

RESERVATION_OPS: st.SearchStrategy[ReservationOp | None] = st.one_of(
    st.builds(ReserveOp, st.sampled_from(IDS), st.sampled_from([REPO, REPO, "website"]),
              st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2).map(tuple),
              shared=st.booleans(), minutes=st.sampled_from([1, 5, 60])),
    st.builds(RenewOp, st.sampled_from(IDS), minutes=st.sampled_from([1, 5, 60])),
    st.builds(ReleaseOp, st.lists(st.sampled_from(IDS), max_size=2).map(tuple)),
    st.builds(ReleaseOp, repo=st.just(REPO),
              patterns=st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2).map(tuple)),
    st.builds(ReleaseOp),
    st.none(),  # the sender leaves the room (or is removed)
)


@st.composite
def room_logs(draw: st.DrawFn) -> Log:
    """Two to five people; the relay interleaves their ops, stamps them with a time that mostly
    moves on (sometimes not at all, now and then back), and may sequence a retried send twice."""
    people = EVERYONE[: draw(st.integers(2, 5))]
    log = Log()
    ts = T0
    for _ in range(draw(st.integers(1, 30))):
        ts += draw(st.sampled_from([0.0, 0.0, 30.0, MINUTE, 5 * MINUTE, 61 * MINUTE, -MINUTE]))
        who = draw(st.sampled_from(people))
        op = draw(RESERVATION_OPS)
        if op is None:
            log.left(who, ts=ts)
            continue
        sent = [e for e in log.entries if e.op is not None]
        if sent and draw(st.integers(0, 6)) == 0:
            retry = draw(st.sampled_from(sent))
            log.add(retry.who, retry.op, ts=ts, op_id=retry.op_id)  # type: ignore[arg-type]
        log.add(who, op, ts=ts)
        if draw(st.booleans()):
            log.other()
    return log


def violations(held: list[Reservation]) -> list[tuple[str, str]]:
    """Pairs of reservations of different people that share a path where either is exclusive."""
    found = []
    for a, b in itertools.combinations(held, 2):
        if a.holder == b.holder or (a.shared and b.shared) or a.repo.lower() != b.repo.lower():
            continue
        if any(overlaps(p, q) for p in a.patterns for q in b.patterns):
            found.append((a.reservation_id, b.reservation_id))
    return found


def replay(log: Log, book: ReservationBook | None = None) -> ReservationBook:
    book = book or ReservationBook("room-1")
    log.feed(book)
    return book


@settings(max_examples=100)
@given(log=room_logs(), data=st.data())
def test_replicas_of_one_log_converge(log: Log, data: st.DataObject) -> None:
    """Full replay, at-least-once redelivery and snapshot catch-up all reach one hash."""
    reference = replay(log).state_hash()
    assert replay(log).state_hash() == reference

    redelivered = ReservationBook("room-1")
    for index in range(len(log.entries)):
        log.feed(redelivered, index, index + 1)
        if data.draw(st.booleans()):
            log.feed(redelivered, data.draw(st.integers(0, index)), index + 1)
    assert redelivered.state_hash() == reference

    cut = data.draw(st.integers(0, len(log.entries)))
    donor = ReservationBook("room-1")
    log.feed(donor, 0, cut)
    wire = json.loads(canonical_bytes(donor.snapshot()))
    caught_up = ReservationBook.from_snapshot(structure_remote(wire, ReservationSnapshot))
    log.feed(caught_up, cut)
    assert caught_up.state_hash() == reference


@settings(max_examples=100)
@given(log=room_logs())
def test_no_two_people_ever_hold_one_path_where_either_is_exclusive(log: Log) -> None:
    """After every op: the held reservations are pairwise compatible and none is past its
    until; what is active at any later relay time is a subset, so compatible too."""
    book = ReservationBook("room-1")
    for entry in log.entries:
        feed_one(book, entry)
        held = book.active(float("-inf"))
        assert violations(held) == []
        assert all(r.until > book.clock for r in held)


class SharedBlindBook(ReservationBook):
    """A planted bug: it forgets that a shared reservation still blocks an exclusive one."""

    def conflicts(self, wanted: Reservation, *, now_ts: float) -> list[Conflict]:
        found = super().conflicts(wanted, now_ts=now_ts)
        return [c for c in found if not (c.shared or wanted.shared)]


def _violated_with(book_type: type[ReservationBook], log: Log) -> bool:
    book = book_type("room-1")
    for entry in log.entries:
        feed_one(book, entry)
        if violations(book.active(float("-inf"))):
            return True
    return False


def test_the_invariant_check_catches_a_book_blind_to_shared_reservations() -> None:
    """On a log of two ops the planted bug breaks the invariant and the real book does not;
    and the random logs of the property above find such a log on their own."""
    log = Log()
    log.add(MARIE, ReserveOp("m1", REPO, ("src/**",), shared=True))
    log.add(JO, ReserveOp("j1", REPO, ("src/a.py",)))
    assert _violated_with(SharedBlindBook, log)
    assert not _violated_with(ReservationBook, log)

    @settings(max_examples=1000, database=None, phases=[Phase.generate], derandomize=True)
    @given(log=room_logs())
    def holds_for_the_planted_bug(log: Log) -> None:
        assert not _violated_with(SharedBlindBook, log)

    with pytest.raises(AssertionError):
        holds_for_the_planted_bug()


@given(orders=st.lists(st.permutations([MARIE, JO, KIM, LEE]), min_size=3, max_size=3),
       cut=st.integers(1, 12))
def test_four_people_racing_for_overlapping_globs_get_one_holder_a_round(
    orders: list[list[Person]], cut: int
) -> None:
    """Three rounds, each a new hour: four reserves of overlapping globs at one relay time, on
    consecutive seqs. The first in log order wins everywhere; the others are refused naming it."""
    globs = {MARIE: "src/**", JO: "src/*.py", KIM: "**/a.py", LEE: "src/[a-c].py"}
    log = Log()
    for round_no, order in enumerate(orders):
        ts = T0 + round_no * 61 * MINUTE
        for person in order:
            op = ReserveOp(f"{person.label}-{round_no}", REPO, (globs[person],))
            log.add(person, op, ts=ts, op_id=f"{person.label}-{round_no}")
    live, late = ReservationBook("room-1"), ReservationBook("room-1")
    log.feed(live)
    log.feed(late, 0, cut)
    log.feed(late, 0, cut)  # redelivered
    log.feed(late, cut)
    for book in (live, late):
        for round_no, order in enumerate(orders):
            outcomes = [book.outcome_of(f"{p.label}-{round_no}") for p in order]
            codes = [o.code if o else None for o in outcomes]
            assert codes == [ReservationCode.GRANTED] + [ReservationCode.REFUSED] * 3
            assert all(o and o.conflict and o.conflict.holder == order[0] for o in outcomes[1:])
        assert [r.holder for r in book.active(book.clock)] == [orders[-1][0]]
    assert live.state_hash() == late.state_hash()
