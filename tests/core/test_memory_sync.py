"""The memory-sync machine alone: every state against every input, then each rule by itself."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from crosstalk.core.memory_sync import (
    JOURNAL_MAX,
    PROBE_EVERY,
    RETRY_AFTER,
    TRANSITIONS,
    AskForRepair,
    AskForSnapshot,
    DropJournal,
    GiveUpHole,
    MemorySyncState,
    NobodyToAsk,
    NotAnswered,
    OurMemory,
    PostProbe,
    RoomSync,
    SendSnapshot,
    SyncInput,
    SyncState,
)
from crosstalk.errors import LocalProtocolError, RemoteProtocolError

R = "room-1"
ME, BEN, CY, EVE = "me", "ben", "cy", "eve"
HOLED = OurMemory(hole=True, held_from=5, conceded=False)
WHOLE = OurMemory(hole=False, held_from=None, conceded=False)


def exhausted(sync: MemorySyncState) -> None:
    """ASKING, then the one other member online had our sequenced ask for RETRY_AFTER in vain."""
    other = EVE
    sync.room(R).retry_due(0.0, {other}, [sync.me, other])
    (ask,) = sync.commands_to_send()
    assert isinstance(ask, AskForSnapshot)
    sync.room(R).ask_heard(ask.generation, other, 0.0)
    sync.room(R).retry_due(RETRY_AFTER, {other}, [sync.me, other])


def errored(sync: MemorySyncState) -> None:
    with pytest.raises(LocalProtocolError):
        sync.room(R).hole_filled()


# How to bring a fresh machine's room to each state.
REACH: dict[SyncState, list[Callable[[MemorySyncState], None]]] = {
    SyncState.OUT: [],
    SyncState.IN_SYNC: [lambda s: s.room(R).joined()],
    SyncState.ASKING: [lambda s: s.room(R).joined(), lambda s: s.room(R).hole_seen()],
    SyncState.EXHAUSTED: [lambda s: s.room(R).joined(), lambda s: s.room(R).hole_seen(), exhausted],
    SyncState.CONCEDED: [lambda s: s.room(R).joined(), lambda s: s.room(R).conceded_seen(3)],
    SyncState.ERROR: [errored],
}


def feed(sync: MemorySyncState, happened: SyncInput, state: SyncState) -> None:
    """Feed ``happened`` with arguments that make sense in ``state``."""
    ours = OurMemory(
        hole=state in (SyncState.ASKING, SyncState.EXHAUSTED),
        held_from=5 if state in (SyncState.ASKING, SyncState.EXHAUSTED) else None,
        conceded=state is SyncState.CONCEDED,
    )
    calls: dict[SyncInput, Callable[[], None]] = {
        SyncInput.JOINED: lambda: sync.room(R).joined(),
        SyncInput.PROBED: lambda: sync.room(R).probed(),
        SyncInput.LEFT: lambda: sync.room(R).left(),
        SyncInput.HOLE_SEEN: lambda: sync.room(R).hole_seen(),
        SyncInput.HOLE_FILLED: lambda: sync.room(R).hole_filled(),
        SyncInput.CONCEDED_SEEN: lambda: sync.room(R).conceded_seen(4),
        SyncInput.REPAIRED: lambda: sync.room(R).repaired(),
        SyncInput.RETRY_DUE: lambda: sync.room(R).retry_due(100.0, {BEN}, [ME, BEN]),
        SyncInput.LOOK_DUE: lambda: sync.room(R).look_due({BEN}, [ME, BEN]),
        SyncInput.ASK_HEARD: lambda: sync.room(R).ask_heard(1, BEN, 100.0),
        SyncInput.SNAPSHOT_ASKED: lambda: sync.room(R).snapshot_asked(
            "req", BEN, 9, repair=False, ours=ours
        ),
        SyncInput.SNAPSHOT_SEEN: lambda: sync.room(R).snapshot_seen(BEN),
        SyncInput.LOG_RESUMED: lambda: sync.room(R).log_resumed(10, 3),
    }
    calls[happened]()


def at(state: SyncState, me: str = ME) -> MemorySyncState:
    sync = MemorySyncState(me)
    for step in REACH[state]:
        step(sync)
    assert sync.state(R) is state
    sync.commands_to_send()
    sync.events()
    return sync


@pytest.mark.parametrize("happened", list(SyncInput), ids=lambda i: i.value)
@pytest.mark.parametrize("state", list(SyncState), ids=lambda s: s.name)
def test_every_input_in_every_state_goes_where_the_table_says_or_parks_in_error(
    state: SyncState, happened: SyncInput
) -> None:
    """A legal input leads to one of the states its table entry lists; any other raises a
    LocalProtocolError and leaves the room in ERROR."""
    sync = at(state)
    allowed = TRANSITIONS[state].get(happened)
    if allowed is None:
        with pytest.raises(LocalProtocolError):
            feed(sync, happened, state)
        assert sync.state(R) is SyncState.ERROR
    else:
        feed(sync, happened, state)
        assert sync.state(R) in allowed


def test_the_table_covers_every_state_and_every_target_is_reachable() -> None:
    """Each state has a row, and each state but OUT and ERROR is some input's target."""
    assert set(TRANSITIONS) == set(SyncState)
    targets = {t for row in TRANSITIONS.values() for ts in row.values() for t in ts}
    assert targets >= set(SyncState) - {SyncState.ERROR}


def test_a_transition_the_table_does_not_list_raises_and_parks_in_error() -> None:
    """The check of where an input leads can fail: a machine that moves a refused request in
    ASKING to CONCEDED (planted by giving it the hole state's concession) is stopped."""

    class PlantedRoom(RoomSync):
        def _may_concede(self, *args: object) -> bool:
            return True

    class Planted(MemorySyncState):
        room_machine = PlantedRoom

    sync = Planted(ME)
    sync.room(R).joined()
    sync.room(R).hole_seen()
    with pytest.raises(LocalProtocolError):
        sync.room(R).snapshot_asked("req", BEN, 9, repair=False, ours=HOLED)
    assert sync.state(R) is SyncState.ERROR


# --- asking ---------------------------------------------------------------------------------------


def asking(*, online: set[str], roster: list[str],
           inviter: str | None = None) -> tuple[MemorySyncState, list[str]]:
    """A room with a hole, asked five times at RETRY_AFTER intervals; who was asked."""
    sync = MemorySyncState(ME)
    sync.observe([R], {R}, {})
    asked: list[str] = []
    for n in range(5):
        sync.tick(n * RETRY_AFTER, online, {R: roster}, {R: inviter})
        asked += [c.member for c in sync.commands_to_send() if isinstance(c, AskForSnapshot)]
    return sync, asked


def test_a_hole_asks_at_once_and_goes_round_the_online_members_in_order() -> None:
    """Never ourselves, never one offline; round after round in the same order (seed 1683)."""
    _, asked = asking(online={BEN, CY, ME}, roster=[ME, CY, BEN, "eve"])
    assert asked == [BEN, CY, BEN, CY, BEN]


def test_a_new_hole_asks_who_invited_us_first_then_goes_round() -> None:
    """The inviter was in the room before us: asked first, then the round's order as before."""
    _, asked = asking(online={BEN, CY, EVE}, roster=[ME, CY, BEN, EVE], inviter=EVE)
    assert asked == [EVE, BEN, CY, BEN, CY]


def test_an_inviter_offline_or_gone_changes_nothing() -> None:
    _, offline = asking(online={BEN, CY}, roster=[ME, CY, BEN, EVE], inviter=EVE)
    _, gone = asking(online={BEN, CY, "zed"}, roster=[ME, CY, BEN], inviter="zed")
    assert offline == gone == [BEN, CY, BEN, CY, BEN]


def test_with_nobody_online_it_asks_nobody_and_says_so() -> None:
    """No member online: no ask, a NobodyToAsk event, and the next retry RETRY_AFTER later."""
    sync = MemorySyncState(ME)
    sync.observe([R], {R}, {})
    sync.events()
    sync.tick(0.0, set(), {R: [ME, BEN]})
    assert sync.commands_to_send() == []
    assert NobodyToAsk(R) in sync.events()
    assert sync.next_deadline() == RETRY_AFTER


def test_alone_in_the_room_the_hole_is_given_up_at_the_second_retry() -> None:
    """No other joined member can ever fill it: given up at RETRY_AFTER, not at once."""
    sync = MemorySyncState(ME)
    sync.observe([R], {R}, {})
    sync.tick(0.0, set(), {R: [ME]})
    assert sync.commands_to_send() == []
    sync.tick(RETRY_AFTER, set(), {R: [ME]})
    assert sync.commands_to_send() == [GiveUpHole(R, "no other member")]
    assert sync.state(R) is SyncState.CONCEDED


def test_asks_the_relay_never_sequenced_or_from_an_older_hole_do_not_exhaust() -> None:
    """Exhaustion counts only asks heard for this hole, RETRY_AFTER after they were heard."""
    sync = MemorySyncState(ME)
    sync.observe([R], {R}, {})
    sync.tick(0.0, {BEN}, {R: [ME, BEN]})
    (old,) = sync.commands_to_send()
    assert isinstance(old, AskForSnapshot)
    sync.observe([R], set(), {})  # filled
    sync.observe([R], {R}, {})  # a new hole
    sync.tick(1.0, {BEN}, {R: [ME, BEN]})
    sync.room(R).ask_heard(old.generation, BEN, 1.0)
    for n in range(2, 6):
        sync.tick(n * RETRY_AFTER, {BEN}, {R: [ME, BEN]})
    assert sync.state(R) is SyncState.ASKING


# --- answering and conceding ---------------------------------------------------------------------


def test_an_exhausted_member_concedes_only_to_one_that_missed_more() -> None:
    """Ours ends at 5: Ben's at 3 or unknown is refused; Ben's at 9 makes us give up and answer."""
    sync = at(SyncState.EXHAUSTED)
    for theirs in (3, None):
        sync.room(R).snapshot_asked("r", BEN, theirs, repair=False, ours=HOLED)
        assert sync.commands_to_send() == []
    sync.room(R).snapshot_asked("r9", BEN, 9, repair=False, ours=HOLED)
    assert sync.commands_to_send() == [
        GiveUpHole(R, f"{BEN} missed more"), SendSnapshot(R, "r9", BEN),
    ]
    assert sync.state(R) is SyncState.CONCEDED


def test_a_tie_in_where_holes_end_goes_to_the_lower_fingerprint() -> None:
    """Same held_from: "ben" < "cy", so Ben concedes to Cy and not the other way round."""
    ben = at(SyncState.EXHAUSTED, me=BEN)
    ben.room(R).snapshot_asked("r", CY, 5, repair=False, ours=HOLED)
    assert GiveUpHole(R, f"{CY} missed more") in ben.commands_to_send()
    cy = at(SyncState.EXHAUSTED, me=CY)
    cy.room(R).snapshot_asked("r", BEN, 5, repair=False, ours=HOLED)
    assert cy.commands_to_send() == []


def test_still_asking_a_member_with_a_hole_does_not_answer() -> None:
    """Not exhausted yet: however much the asker missed, we keep our hole and say why."""
    sync = at(SyncState.ASKING)
    sync.room(R).snapshot_asked("r", BEN, 99, repair=False, ours=HOLED)
    assert sync.commands_to_send() == []
    assert NotAnswered(R, BEN, "our own memory has a hole") in sync.events()


def test_a_repair_is_answered_only_by_a_memory_that_gave_nothing_up() -> None:
    """A conceded memory answers an ordinary ask but not a repair; a whole one answers both."""
    sync = at(SyncState.CONCEDED)
    conceded = OurMemory(hole=False, held_from=None, conceded=True)
    sync.room(R).snapshot_asked("fix", BEN, None, repair=True, ours=conceded)
    sync.room(R).snapshot_asked("ask", BEN, None, repair=False, ours=conceded)
    assert sync.commands_to_send() == [SendSnapshot(R, "ask", BEN)]
    whole = at(SyncState.IN_SYNC)
    whole.room(R).snapshot_asked("fix", BEN, None, repair=True, ours=WHOLE)
    assert whole.commands_to_send() == [SendSnapshot(R, "fix", BEN)]


def test_a_member_seen_sending_a_snapshot_is_asked_at_once_before_we_may_concede() -> None:
    """Exhausted, we see Cy answer someone: back to ASKING, Cy is asked at once, and Ben's ask
    (Ben missed more) is refused until Cy too had our ask for RETRY_AFTER in vain."""
    sync = at(SyncState.EXHAUSTED)
    sync.room(R).snapshot_seen(CY)
    assert sync.state(R) is SyncState.ASKING and sync.next_deadline() == float("-inf")
    sync.tick(20.0, {BEN, CY}, {R: [ME, BEN, CY]})
    (ask,) = sync.commands_to_send()
    assert isinstance(ask, AskForSnapshot) and ask.member == CY
    sync.room(R).ask_heard(ask.generation, CY, 20.0)
    sync.room(R).snapshot_asked("r", BEN, 9, repair=False, ours=HOLED)
    assert sync.commands_to_send() == []
    sync.tick(35.0, {BEN, CY}, {R: [ME, BEN, CY]})
    (to_ben,) = sync.commands_to_send()
    assert isinstance(to_ben, AskForSnapshot) and to_ben.member == BEN
    sync.room(R).ask_heard(to_ben.generation, BEN, 35.0)
    sync.tick(50.0, {BEN, CY}, {R: [ME, BEN, CY]})
    sync.commands_to_send()
    sync.room(R).snapshot_asked("r", BEN, 9, repair=False, ours=HOLED)
    assert GiveUpHole(R, f"{BEN} missed more") in sync.commands_to_send()


def test_a_request_from_ourselves_is_a_remote_error_that_parks_the_room() -> None:
    """Our own fingerprint asking us is nonsense from the wire: RemoteProtocolError, ERROR;
    leaving the room is the way out."""
    sync = at(SyncState.IN_SYNC)
    with pytest.raises(RemoteProtocolError):
        sync.room(R).snapshot_asked("r", ME, None, repair=False, ours=WHOLE)
    assert sync.state(R) is SyncState.ERROR
    sync.room(R).left()
    assert sync.state(R) is SyncState.OUT


# --- probing, repairing, out of the room ----------------------------------------------------------


def test_rooms_joined_after_start_are_probed_at_the_next_look_and_only_then() -> None:
    """Probed at start: never again; joined later: at the next look, once."""
    sync = MemorySyncState(ME)
    sync.started([R], 0.0)
    sync.observe([R, "room-2"], set(), {})
    sync.tick(PROBE_EVERY - 1, set(), {})
    assert sync.commands_to_send() == []
    sync.tick(PROBE_EVERY, set(), {})
    sync.tick(PROBE_EVERY * 2, set(), {})
    assert sync.commands_to_send() == [PostProbe("room-2")]


def test_a_link_up_probes_only_a_room_we_are_in_whose_log_now_starts_past_ours() -> None:
    """first - 1 > received_through: ops are gone; a room we are not in is left alone."""
    sync = at(SyncState.IN_SYNC)
    sync.room(R).log_resumed(4, 3)
    sync.room("elsewhere").log_resumed(10, 3)
    sync.room(R).log_resumed(5, 3)
    assert sync.commands_to_send() == [PostProbe(R)]


def test_a_conceded_memory_asks_each_online_member_once_then_drops_a_big_journal() -> None:
    """Each look asks the online members not asked yet; past JOURNAL_MAX the journal goes."""
    sync = MemorySyncState(ME)
    sync.started([R], 0.0)
    sync.observe([R], set(), {R: 3})
    sync.tick(PROBE_EVERY, {BEN}, {R: [ME, BEN, CY]})
    sync.tick(PROBE_EVERY * 2, {BEN, CY}, {R: [ME, BEN, CY]})
    assert sync.commands_to_send() == [AskForRepair(R, BEN), AskForRepair(R, CY)]
    sync.observe([R], set(), {R: JOURNAL_MAX + 1})
    sync.tick(PROBE_EVERY * 3, {BEN, CY}, {R: [ME, BEN, CY]})
    assert sync.commands_to_send() == [DropJournal(R)]
    assert sync.state(R) is SyncState.IN_SYNC


def test_a_room_we_left_is_not_asked_about_and_its_asks_count_afresh_on_return() -> None:
    """Leaving forgets the round; back in, the first ask goes to the first member again and
    no earlier ask counts towards giving up."""
    sync, _ = asking(online={BEN, CY}, roster=[ME, BEN, CY])
    sync.observe([], set(), {})
    assert sync.state(R) is SyncState.OUT
    sync.tick(100.0, {BEN, CY}, {R: [ME, BEN, CY]})
    assert sync.commands_to_send() == []
    sync.observe([R], {R}, {})
    sync.tick(101.0, {BEN, CY}, {R: [ME, BEN, CY]})
    asks = [c for c in sync.commands_to_send() if isinstance(c, AskForSnapshot)]
    assert asks[0].member == BEN
    assert sync.state(R) is SyncState.ASKING
