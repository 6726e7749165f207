"""Memory sync's rules, sans-IO (:class:`MemorySyncState`; the theory is in
:mod:`~crosstalk.core.memory_sync.machine`, its outputs in
:mod:`~crosstalk.core.memory_sync.outputs`). The memory-sync actor is its only caller."""

from __future__ import annotations

from crosstalk.core.memory_sync.machine import TRANSITIONS, MemorySyncState
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
    "SendSnapshot",
    "SyncInput",
    "SyncState",
]
