"""Memory sync's rules, sans-IO: :class:`MemorySyncState` (``machine.py``) owns one
:class:`RoomSync` per room (``room.py``: the rules, their theory and the transition table); the
states, inputs, commands and events are in ``outputs.py``. The memory-sync actor is its only
caller."""

from __future__ import annotations

from crosstalk.core.memory_sync.machine import MemorySyncState
from crosstalk.core.memory_sync.outputs import (
    JOURNAL_MAX,
    PROBE_EVERY,
    RETRY_AFTER,
    AskForRepair,
    AskForSnapshot,
    Command,
    DropJournal,
    Event,
    GiveUpHole,
    Moved,
    NobodyToAsk,
    NotAnswered,
    OurMemory,
    PostProbe,
    SendSnapshot,
    SyncInput,
    SyncState,
)
from crosstalk.core.memory_sync.room import TRANSITIONS, RoomSync

__all__ = [
    "JOURNAL_MAX",
    "PROBE_EVERY",
    "RETRY_AFTER",
    "TRANSITIONS",
    "AskForRepair",
    "AskForSnapshot",
    "Command",
    "DropJournal",
    "Event",
    "GiveUpHole",
    "MemorySyncState",
    "Moved",
    "NobodyToAsk",
    "NotAnswered",
    "OurMemory",
    "PostProbe",
    "RoomSync",
    "SendSnapshot",
    "SyncInput",
    "SyncState",
]
