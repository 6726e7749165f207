"""Tables for attention (one migration step, appended in crosstalk/store/migrations.py).

What the attention gate keeps across restarts: the receiver's trust settings, timed mutes, the
stamps of self-initiated sends (the ration), the attention record, and ``notices`` - what the
gate decided for each arrived message and for which session. Times are wall-clock seconds.
People are keyed by fingerprint (or ``post:<name>`` for a local post source), rooms by relay
room id, so a rename never loses a setting.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    # The trust dial (crosstalk/core/levels.py TrustSettings), one row per entry. `scope` says
    # which kind: the default, the local-post level, a room's level, a person's global pin, or
    # a person's pin within one room. Unused key columns hold '' so the primary key is total.
    """CREATE TABLE trust_levels (
        scope TEXT NOT NULL
            CHECK (scope IN ('default', 'local', 'room', 'person', 'room_person')),
        room_id TEXT NOT NULL DEFAULT '',
        person TEXT NOT NULL DEFAULT '',
        level TEXT NOT NULL CHECK (level IN ('mute', 'notify', 'ask', 'handoff', 'deliver')),
        PRIMARY KEY (scope, room_id, person)
    )""",
    # Timed mutes (crosstalk/core/mute.py): key (person, room id or '*') -> when it ends.
    """CREATE TABLE mutes (
        key TEXT PRIMARY KEY,
        until REAL NOT NULL
    )""",
    # Self-initiated sends per recipient (crosstalk/core/ration.py), one row per send.
    """CREATE TABLE ration_stamps (
        recipient TEXT NOT NULL,
        sent_at REAL NOT NULL
    )""",
    "CREATE INDEX ration_stamps_by_recipient ON ration_stamps (recipient, sent_at)",
    # The attention record (crosstalk/core/attention.py): one row per gate decision and one
    # more when a held item surfaces (same `item`).
    """CREATE TABLE attention_record (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        item TEXT NOT NULL,
        source TEXT NOT NULL,
        ts REAL NOT NULL,
        decision TEXT NOT NULL
    )""",
    "CREATE INDEX attention_record_by_ts ON attention_record (ts)",
    "CREATE INDEX attention_record_by_item ON attention_record (item)",
    # What the gate decided for each arrived message, and for which session. `session` NULL =
    # any session (or parked until one exists); `target` is what the sender addressed (a session
    # or project name, NULL = anyone), kept so a later session can claim a parked notice.
    # `surfaced_at` is set when the notice is released to a session (at once for `due = 'now'`,
    # by the idle watcher or a mute's end for held ones); `batch` groups what surfaced together
    # (one notice per sender); `shown_at` is for the hook or inbox that actually showed it.
    # Drop, refuse and record-only decisions are rows too, never surfaced.
    """CREATE TABLE notices (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL,
        session TEXT,
        target TEXT,
        sender TEXT NOT NULL,
        label TEXT NOT NULL,
        from_session TEXT,
        room_id TEXT,
        intent TEXT NOT NULL CHECK (intent IN ('fyi', 'question', 'blocking')),
        kind TEXT NOT NULL,
        decision TEXT NOT NULL,
        due TEXT NOT NULL CHECK (due IN ('now', 'idle')),
        created_at REAL NOT NULL,
        surfaced_at REAL,
        batch TEXT,
        shown_at REAL
    )""",
    "CREATE UNIQUE INDEX notices_once ON notices (message_id, ifnull(session, ''))",
    "CREATE INDEX notices_waiting ON notices (surfaced_at, session)",
)
