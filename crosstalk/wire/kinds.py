"""What a message op says about itself: its kind, and how urgent its sender says it is.

Both travel inside the sealed op (:mod:`crosstalk.wire.room_ops`); the attention gate's triage
(:mod:`crosstalk.core.triage`) decides over them. They live here, with the wire models, because
the wire is the lower layer: cores take wire models as inputs, the wire imports no core.
"""

from __future__ import annotations

import enum

from crosstalk.errors import UsageError


class Intent(enum.Enum):
    """How urgent the sender says it is. Decides when it lands, never whether."""

    FYI = "fyi"
    QUESTION = "question"
    BLOCKING = "blocking"

    @classmethod
    def parse(cls, text: str) -> Intent:
        """Read ``--intent`` as typed (case and surrounding blanks ignored).

        Raises:
            UsageError: ``text`` names no intent.
        """
        wanted = text.strip().lower()
        for intent in cls:
            if intent.value == wanted:
                return intent
        raise UsageError(f"{text.strip()!r} is not an intent: use fyi, question or blocking.")


class Kind(enum.Enum):
    """What an op carries."""

    MESSAGE = "message"
    ASK = "ask"
    ANSWER = "answer"
    HANDOFF = "handoff"
    NOTICE = "notice"
    FACT = "fact"
    TASK = "task"
    DECISION = "decision"

    @property
    def is_memory(self) -> bool:
        """A write to the room's shared memory rather than something for the agent's turn."""
        return self in _MEMORY_KINDS


_MEMORY_KINDS = frozenset({Kind.FACT, Kind.TASK, Kind.DECISION})
