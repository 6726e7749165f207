"""What a message op says about itself: its kind, and how urgent its sender says it is.

Both travel inside the sealed op (:mod:`crosstalk.wire.room_ops`); the attention gate's triage
(:mod:`crosstalk.core.triage`) decides over them. They live here, with the wire models, because
the wire is the lower layer: cores take wire models as inputs, the wire imports no core.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from crosstalk.errors import UsageError

E = TypeVar("E", bound=enum.Enum)


def parse_choice(cls: type[E], text: str, what: str) -> E:
    """Read a member of ``cls`` as a user typed its value (case and surrounding blanks ignored).

    Raises:
        UsageError: ``text`` names none; the sentence calls it ``what`` and lists the values.
    """
    wanted = text.strip().lower()
    for member in cls:
        if member.value == wanted:
            return member
    names = ", ".join(str(member.value) for member in cls)
    raise UsageError(f"{text.strip()!r} is not {what}: use one of {names}.")


class Intent(enum.Enum):
    """How urgent the sender says it is. Decides when it lands, never whether."""

    FYI = "fyi"
    QUESTION = "question"
    BLOCKING = "blocking"

    @classmethod
    def parse(cls, text: str) -> Intent:
        """Read ``--intent`` as typed (see :func:`parse_choice`)."""
        return parse_choice(cls, text, "an intent")


class Kind(enum.Enum):
    """What an op carries."""

    MESSAGE = "message"
    ASK = "ask"
    ANSWER = "answer"
    HANDOFF = "handoff"
    #: The recipient's attention gate refused an ask or handoff (``reply_to`` names it): sent
    #: automatically, never a question; the sender's ``sent`` shows the message refused.
    REFUSAL = "refusal"
    NOTICE = "notice"
    FACT = "fact"
    TASK = "task"
    DECISION = "decision"

    @property
    def is_memory(self) -> bool:
        """A write to the room's shared memory rather than something for the agent's turn."""
        return self in _MEMORY_KINDS


_MEMORY_KINDS = frozenset({Kind.FACT, Kind.TASK, Kind.DECISION})
