"""Triage: every level x intent x kind x status x muted, from a table written out by hand."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.core.levels import Level
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus, triage
from crosstalk.errors import UsageError

CODES = {
    "D": Decision.DROP,
    "Q": Decision.HOLD_QUIET,
    "R": Decision.REFUSE,
    "n": Decision.NOTICE_NOW,
    "N": Decision.NOTICE_WHEN_IDLE,
    "w": Decision.DELIVER_NOW,
    "W": Decision.DELIVER_WHEN_IDLE,
    "M": Decision.RECORD_ONLY,
}

# Each row: 18 codes. Left of "|": not muted; right: muted. Within a side, three groups for
# intent fyi, question, blocking; within a group, session status busy, idle, unknown.
ALL_DROP = "DDD DDD DDD | DDD DDD DDD"
ALL_REFUSE = "RRR RRR RRR | RRR RRR RRR"
ALL_RECORD = "MMM MMM MMM | MMM MMM MMM"
NOTICES = "NnN nnn nnn | QQQ QQQ nnn"
WORDS = "WwW www www | QQQ QQQ nnn"

TABLE: dict[tuple[Kind, Level], str] = {
    (Kind.MESSAGE, Level.MUTE): ALL_DROP,
    (Kind.MESSAGE, Level.NOTIFY): NOTICES,
    (Kind.MESSAGE, Level.ASK): NOTICES,
    (Kind.MESSAGE, Level.HANDOFF): NOTICES,
    (Kind.MESSAGE, Level.DELIVER): WORDS,
    (Kind.NOTICE, Level.MUTE): ALL_DROP,
    (Kind.NOTICE, Level.NOTIFY): NOTICES,
    (Kind.NOTICE, Level.ASK): NOTICES,
    (Kind.NOTICE, Level.HANDOFF): NOTICES,
    (Kind.NOTICE, Level.DELIVER): WORDS,
    (Kind.ASK, Level.MUTE): ALL_DROP,
    (Kind.ASK, Level.NOTIFY): ALL_REFUSE,
    (Kind.ASK, Level.ASK): NOTICES,
    (Kind.ASK, Level.HANDOFF): NOTICES,
    (Kind.ASK, Level.DELIVER): WORDS,
    (Kind.HANDOFF, Level.MUTE): ALL_DROP,
    (Kind.HANDOFF, Level.NOTIFY): ALL_REFUSE,
    (Kind.HANDOFF, Level.ASK): ALL_REFUSE,
    (Kind.HANDOFF, Level.HANDOFF): NOTICES,
    (Kind.HANDOFF, Level.DELIVER): WORDS,
    (Kind.ANSWER, Level.MUTE): ALL_DROP,
    (Kind.ANSWER, Level.NOTIFY): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.ANSWER, Level.ASK): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.ANSWER, Level.HANDOFF): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.ANSWER, Level.DELIVER): "www www www | QQQ QQQ nnn",
    # A refusal (its own kind since issue 39) earns its line at once, as an answer does.
    (Kind.REFUSAL, Level.MUTE): ALL_DROP,
    (Kind.REFUSAL, Level.NOTIFY): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.REFUSAL, Level.ASK): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.REFUSAL, Level.HANDOFF): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.REFUSAL, Level.DELIVER): "www www www | QQQ QQQ nnn",
    **{(kind, level): ALL_RECORD for kind in (Kind.FACT, Kind.TASK) for level in Level},
    # A decision is announced like an answer: a line at once, words only at deliver.
    (Kind.DECISION, Level.MUTE): ALL_DROP,
    (Kind.DECISION, Level.NOTIFY): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.DECISION, Level.ASK): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.DECISION, Level.HANDOFF): "nnn nnn nnn | QQQ QQQ nnn",
    (Kind.DECISION, Level.DELIVER): "www www www | QQQ QQQ nnn",
}

INTENTS = (Intent.FYI, Intent.QUESTION, Intent.BLOCKING)
STATUSES = (SessionStatus.BUSY, SessionStatus.IDLE, SessionStatus.UNKNOWN)


def _rows() -> list[tuple[Level, Intent, Kind, SessionStatus, bool, Decision]]:
    rows = []
    for (kind, level), codes in TABLE.items():
        letters = codes.replace(" ", "").replace("|", "")
        combos = itertools.product((False, True), INTENTS, STATUSES)
        for letter, (muted, intent, status) in zip(letters, combos, strict=True):
            rows.append((level, intent, kind, status, muted, CODES[letter]))
    return rows


def _row_id(row: tuple[Level, Intent, Kind, SessionStatus, bool, Decision]) -> str:
    level, intent, kind, status, muted, _ = row
    return (
        f"{kind.value}-{level.value}-{intent.value}-{status.value}-{'muted' if muted else 'open'}"
    )


def test_the_table_covers_every_combination() -> None:
    """The hand-written table has exactly one row per level x intent x kind x status x muted."""
    rows = _rows()
    keys = {(lv, it, kd, st, mu) for lv, it, kd, st, mu, _ in rows}
    assert len(rows) == len(keys) == len(Level) * len(Intent) * len(Kind) * 3 * 2


@pytest.mark.parametrize("row", _rows(), ids=_row_id)
def test_triage_decides_each_combination_as_tabled(
    row: tuple[Level, Intent, Kind, SessionStatus, bool, Decision],
) -> None:
    """triage() gives the decision the hand-written table says for this combination."""
    level, intent, kind, status, muted, expected = row
    assert triage(level, intent, kind, status, muted) is expected


@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
def test_no_intent_changes_whether_words_enter_the_turn(level: Level) -> None:
    """Urgency decides when, never whether: only the level deliver ever yields words."""
    for intent, kind, status, muted in itertools.product(
        Intent, Kind, SessionStatus, (False, True)
    ):
        decision = triage(level, intent, kind, status, muted)
        assert not decision.words or level is Level.DELIVER


def test_blocking_lifts_a_muted_message_to_a_notice_never_to_words() -> None:
    """During a timed mute a blocking message from a deliver-level source is a notice, not words."""
    decision = triage(Level.DELIVER, Intent.BLOCKING, Kind.MESSAGE, SessionStatus.BUSY, True)
    assert decision is Decision.NOTICE_NOW
    assert not decision.words


def test_unknown_status_is_treated_as_busy() -> None:
    """An fyi to a session whose status is unknown waits for idle, exactly as if busy."""
    for level in (Level.NOTIFY, Level.DELIVER):
        unknown = triage(level, Intent.FYI, Kind.MESSAGE, SessionStatus.UNKNOWN, False)
        busy = triage(level, Intent.FYI, Kind.MESSAGE, SessionStatus.BUSY, False)
        assert unknown is busy
        assert unknown.holds


@pytest.mark.parametrize(
    ("decision", "interrupts", "holds", "words", "readable", "reply"),
    [
        (Decision.DROP, False, False, False, False, None),
        (Decision.HOLD_QUIET, False, True, False, True, None),
        (Decision.REFUSE, False, False, False, False, "refused"),
        (Decision.NOTICE_NOW, True, False, False, True, None),
        (Decision.NOTICE_WHEN_IDLE, False, True, False, True, None),
        (Decision.DELIVER_NOW, True, False, True, True, None),
        (Decision.DELIVER_WHEN_IDLE, False, True, True, True, None),
        (Decision.RECORD_ONLY, False, False, False, False, None),
    ],
    ids=lambda v: v.value if isinstance(v, Decision) else None,
)
def test_decision_properties(
    decision: Decision,
    interrupts: bool,
    holds: bool,
    words: bool,
    readable: bool,
    reply: str | None,
) -> None:
    """Each decision says whether it interrupts, holds, carries words, is kept, and any reply."""
    assert decision.interrupts is interrupts
    assert decision.holds is holds
    assert decision.words is words
    assert decision.readable is readable
    assert decision.auto_reply == reply


def test_memory_kinds_are_the_room_writes() -> None:
    """Facts, tasks and decisions are memory writes; nothing else is."""
    assert {kind for kind in Kind if kind.is_memory} == {Kind.FACT, Kind.TASK, Kind.DECISION}


@pytest.mark.parametrize(
    ("text", "intent"),
    [("fyi", Intent.FYI), (" Question ", Intent.QUESTION), ("BLOCKING", Intent.BLOCKING)],
)
def test_intent_parses_as_typed(text: str, intent: Intent) -> None:
    """An intent is read case-insensitively, ignoring surrounding blanks."""
    assert Intent.parse(text) is intent


def test_unknown_intent_is_a_usage_error() -> None:
    """A mistyped intent is a usage error naming the three choices."""
    with pytest.raises(UsageError) as info:
        Intent.parse("urgent")
    assert info.value.code == "usage"
    assert info.value.message == "'urgent' is not an intent: use one of fyi, question, blocking."
