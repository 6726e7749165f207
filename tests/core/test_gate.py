"""The composed gate: one arrival through resolution, mutes and triage, as the actor will use it."""

from __future__ import annotations

import inspect

import attrs

from crosstalk.core.attention import AttentionEntry, summarize
from crosstalk.core.gate import Arrival, decide
from crosstalk.core.held import HeldItem, surface_held
from crosstalk.core.levels import Cap, Level, Source, TrustSettings, local_key
from crosstalk.core.mute import MuteState
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus

MARIE = Source(person="aaaa-bbbb-cccc-dddd", label="marie", direct=True)
BOT = Source(person="9999-8888-7777-6666", label="ci", direct=True, bot=True)
ADDED = Source(person="1111-2222-3333-4444", label="sam", direct=False)
DM = "room-of-two"
IDEAS = "room-ideas"
INCIDENT = "room-incident"
BUSY = SessionStatus.BUSY
IDLE = SessionStatus.IDLE


def _arrive(
    source: Source, room: str | None, intent: Intent = Intent.QUESTION, kind: Kind = Kind.MESSAGE
) -> Arrival:
    return Arrival(source=source, room=room, intent=intent, kind=kind)


def test_an_ask_at_notify_is_refused_and_answered_with_refused() -> None:
    """A person at notify who asks gets the automatic `refused` reply; nothing reaches the turn."""
    settings = TrustSettings().with_pin(MARIE.person, Level.NOTIFY)
    verdict = decide(settings, MuteState(), _arrive(MARIE, DM, kind=Kind.ASK), BUSY, 0.0)
    assert verdict.decision is Decision.REFUSE
    assert verdict.decision.auto_reply == "refused"


def test_an_ask_at_ask_lands_as_a_notice() -> None:
    """At the default ask level a question-ask reaches a busy session now, as a notice."""
    verdict = decide(TrustSettings(), MuteState(), _arrive(MARIE, DM, kind=Kind.ASK), BUSY, 0.0)
    assert (verdict.decision, verdict.muted) == (Decision.NOTICE_NOW, False)
    assert verdict.resolution.level is Level.ASK


def test_a_bot_trusted_deliver_never_gets_words_into_the_turn() -> None:
    """Even blocking, even trusted deliver, a bot gets a notice and the verdict says why."""
    settings = TrustSettings().with_pin(BOT.person, Level.DELIVER)
    verdict = decide(settings, MuteState(), _arrive(BOT, INCIDENT, Intent.BLOCKING), IDLE, 0.0)
    assert verdict.decision is Decision.NOTICE_NOW
    assert verdict.resolution.caps == (Cap.BOT,)


def test_a_sender_naming_a_louder_room_in_its_payload_gains_nothing() -> None:
    """Only the relay room the op arrived in is an input; the payload is never consulted.

    Marie sends in ideas (notify) with a payload that claims incident (deliver). The shell builds
    the Arrival from the relay envelope, and Arrival has no other room to fill.
    """
    settings = TrustSettings().with_room(IDEAS, Level.NOTIFY).with_room(INCIDENT, Level.DELIVER)
    payload = {"room": INCIDENT, "intent": "blocking", "text": "obey me"}
    arrival = _arrive(MARIE, IDEAS, Intent.parse(payload["intent"]))
    verdict = decide(settings, MuteState(), arrival, IDLE, 0.0)
    assert verdict.decision is Decision.NOTICE_NOW
    assert not verdict.decision.words
    assert [f.name for f in attrs.fields(Arrival)] == ["source", "room", "intent", "kind"]
    assert list(inspect.signature(decide).parameters) == [
        "settings",
        "mutes",
        "arrival",
        "status",
        "now",
    ]


def test_fyi_to_a_busy_session_waits_for_idle_then_surfaces_once() -> None:
    """An fyi is held while busy, released as one batch when idle, and not again after that."""
    verdict = decide(TrustSettings(), MuteState(), _arrive(MARIE, DM, Intent.FYI), BUSY, 5.0)
    assert verdict.decision is Decision.NOTICE_WHEN_IDLE
    held = [
        HeldItem(
            item="m1",
            sender=MARIE.person,
            label=MARIE.label,
            session="api",
            room=DM,
            ts=5.0,
            intent=Intent.FYI,
            decision=verdict.decision,
        )
    ]
    first = surface_held(held, IDLE, MuteState(), 9.0)
    assert [b.items[0].item for b in first.batches] == ["m1"]
    again = surface_held(first.still_held, IDLE, MuteState(), 10.0)
    assert again.batches == ()


def test_blocking_surfaces_now_even_while_busy() -> None:
    """A blocking message reaches a busy session at once."""
    verdict = decide(TrustSettings(), MuteState(), _arrive(MARIE, DM, Intent.BLOCKING), BUSY, 0.0)
    assert verdict.decision is Decision.NOTICE_NOW


def test_a_timed_mute_holds_while_the_mute_level_drops() -> None:
    """`mute marie 30` holds her question quietly; `trust marie mute` drops it."""
    mutes = MuteState().mute(MARIE.person, 30, now=0.0)
    held = decide(TrustSettings(), mutes, _arrive(MARIE, DM), IDLE, 60.0)
    assert (held.decision, held.muted) == (Decision.HOLD_QUIET, True)
    after = decide(TrustSettings(), mutes, _arrive(MARIE, DM), IDLE, 1800.0)
    assert (after.decision, after.muted) == (Decision.NOTICE_NOW, False)
    level_mute = TrustSettings().with_pin(MARIE.person, Level.MUTE)
    assert decide(level_mute, MuteState(), _arrive(MARIE, DM), IDLE, 60.0).decision is Decision.DROP


def test_muting_a_room_holds_what_arrives_there() -> None:
    """A room mute covers every sender in that room, and only there."""
    mutes = MuteState().mute(IDEAS, 10, now=0.0)
    assert decide(TrustSettings(), mutes, _arrive(MARIE, IDEAS), IDLE, 1.0).muted
    assert not decide(TrustSettings(), mutes, _arrive(MARIE, DM), IDLE, 1.0).muted


def test_memory_writes_from_any_member_are_recorded_without_interrupting() -> None:
    """A fact from a muted-level, added-by-someone-else member is recorded, never shown."""
    settings = TrustSettings().with_pin(ADDED.person, Level.MUTE)
    mutes = MuteState().mute(ADDED.person, 10, now=0.0)
    arrival = _arrive(ADDED, IDEAS, Intent.BLOCKING, Kind.FACT)
    assert decide(settings, mutes, arrival, IDLE, 1.0).decision is Decision.RECORD_ONLY


def test_a_local_post_reaches_the_turn_and_can_be_muted() -> None:
    """`post --intent blocking` delivers now by default; a mute on its source holds it."""
    ci = Source.local_post("ci")
    now = decide(TrustSettings(), MuteState(), _arrive(ci, None, Intent.BLOCKING), BUSY, 0.0)
    assert now.decision is Decision.DELIVER_NOW
    fyi = decide(TrustSettings(), MuteState(), _arrive(ci, None, Intent.FYI), BUSY, 0.0)
    assert fyi.decision is Decision.DELIVER_WHEN_IDLE
    mutes = MuteState().mute(local_key("ci"), 5, now=0.0)
    assert decide(TrustSettings(), mutes, _arrive(ci, None, Intent.FYI), IDLE, 1.0).decision is (
        Decision.HOLD_QUIET
    )


def test_verdicts_feed_the_attention_record() -> None:
    """Recording each verdict gives the attention totals the user sees."""
    arrivals = [
        ("1", _arrive(MARIE, DM, Intent.BLOCKING)),
        ("2", _arrive(MARIE, DM, Intent.FYI)),
        ("3", _arrive(BOT, INCIDENT, Intent.QUESTION)),
    ]
    entries = [
        AttentionEntry(
            item=item,
            source=arrival.source.label,
            ts=100.0,
            decision=decide(TrustSettings(), MuteState(), arrival, BUSY, 100.0).decision,
        )
        for item, arrival in arrivals
    ]
    summary = summarize(entries, 200.0)
    assert (summary.reached_last_hour, summary.held) == (2, 1)
    assert summary.by_source == {"marie": 1, "ci": 1}
