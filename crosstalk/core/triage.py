"""Triage: what happens to one arrival, given its source's level.

Theory of operation
-------------------
:func:`triage` is a pure function of five facts and returns one :class:`Decision`:

* ``level``  - the source's resolved level (:mod:`crosstalk.core.levels`);
* ``intent`` - what the sender declared: ``fyi | question | blocking``;
* ``kind``   - ``message | notice | ask | answer | refusal | handoff`` (things for the agent) or
  ``fact | task | decision`` (writes to the room's shared memory);
* ``status`` - the receiving session: ``busy | idle | unknown`` (unknown counts as busy);
* ``muted``  - a timed mute (``crosstalk mute``) covers this source right now.

The rules, in order (the first that applies decides):

====  ============================================  ==========================================
step  when                                          decision
====  ============================================  ==========================================
1     kind is fact or task                          RECORD_ONLY (any member; never interrupts)
2     level is mute                                 DROP (not held, not readable)
3     kind ask below ``ask``, handoff below         REFUSE (the sender gets ``refused`` back)
      ``handoff``
4     muted and intent blocking                     NOTICE_NOW (blocking lifts a held message
                                                    to a notice, never to words)
5     muted                                         HOLD_QUIET (surfaced when the mute ends)
6     kind answer, refusal or decision              DELIVER_NOW at deliver, else NOTICE_NOW
                                                    (answers, refusals and decisions always
                                                    earn a line, at once)
7     intent fyi and session not idle               DELIVER_WHEN_IDLE at deliver, else
                                                    NOTICE_WHEN_IDLE
8     otherwise (question, blocking, or idle)       DELIVER_NOW at deliver, else NOTICE_NOW
====  ============================================  ==========================================

Consequences worth stating (the tests pin every combination):

* Urgency decides *when*, never *whether*: no intent produces a ``DELIVER_*`` decision; only
  the receiver's own level (``deliver``) puts words in the turn.
* ``message`` and ``notice`` kinds behave alike; ``ask`` needs at least ``ask`` and ``handoff``
  at least ``handoff``, and once allowed they are timed by intent like any message.
* A refusal happens even during a timed mute: it costs the receiver nothing and spares the
  sender a wait for a timeout.
* Memory writes are accepted from any room member at any level (they are signed and
  attributed); trust governs only what reaches an agent's turn and when. This avoids the
  original's silently ignored facts in named rooms (behaviour doc §9 item 4).
* A decision is a memory write that is also announced to every member (issue 19 item 6): its
  announcement is triaged like an answer, a line at the member's next event, unless the
  decider's level is mute or a timed mute holds it.
"""

from __future__ import annotations

import enum

from crosstalk.core.levels import Level

# What a message op says about itself travels inside the op, so the two enums live with the wire
# models (the wire imports no core); triage is stated over them, so they are named here too.
from crosstalk.wire.kinds import Intent as Intent
from crosstalk.wire.kinds import Kind as Kind


class SessionStatus(enum.Enum):
    """What the receiving session is doing. ``UNKNOWN`` is treated as busy."""

    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


class Decision(enum.Enum):
    """What the gate does with one arrival."""

    DROP = "drop"
    HOLD_QUIET = "hold_quiet"
    REFUSE = "refuse"
    NOTICE_NOW = "notice_now"
    NOTICE_WHEN_IDLE = "notice_when_idle"
    DELIVER_NOW = "deliver_now"
    DELIVER_WHEN_IDLE = "deliver_when_idle"
    RECORD_ONLY = "record_only"

    @property
    def interrupts(self) -> bool:
        """It reaches the session now (a line, or words)."""
        return self in (Decision.NOTICE_NOW, Decision.DELIVER_NOW)

    @property
    def holds(self) -> bool:
        """It waits: for the session to go idle, or for a timed mute to end."""
        return self in (Decision.HOLD_QUIET, Decision.NOTICE_WHEN_IDLE, Decision.DELIVER_WHEN_IDLE)

    @property
    def words(self) -> bool:
        """The sender's words may enter the agent's turn (quoted between markers)."""
        return self in (Decision.DELIVER_NOW, Decision.DELIVER_WHEN_IDLE)

    @property
    def readable(self) -> bool:
        """The message is kept for ``crosstalk read``."""
        return self.interrupts or self.holds

    @property
    def auto_reply(self) -> str | None:
        """The code sent back to the sender automatically, if any (``refused``)."""
        return "refused" if self is Decision.REFUSE else None


_REQUIRED: dict[Kind, Level] = {Kind.ASK: Level.ASK, Kind.HANDOFF: Level.HANDOFF}


def triage(
    level: Level, intent: Intent, kind: Kind, status: SessionStatus, muted: bool
) -> Decision:
    """Decide what happens to one arrival. The rules are tabled in the module docstring.

    Args:
        level: the source's resolved level.
        intent: the sender's declared urgency.
        kind: what the op carries.
        status: the receiving session's status (unknown counts as busy).
        muted: a timed mute covers the source right now.
    """
    if kind.is_memory and kind is not Kind.DECISION:
        return Decision.RECORD_ONLY
    if level is Level.MUTE:
        return Decision.DROP
    required = _REQUIRED.get(kind)
    if required is not None and not level.includes(required):
        return Decision.REFUSE
    if muted:
        return Decision.NOTICE_NOW if intent is Intent.BLOCKING else Decision.HOLD_QUIET
    words = level is Level.DELIVER
    if kind in (Kind.ANSWER, Kind.DECISION, Kind.REFUSAL):
        return Decision.DELIVER_NOW if words else Decision.NOTICE_NOW
    if intent is Intent.FYI and status is not SessionStatus.IDLE:
        return Decision.DELIVER_WHEN_IDLE if words else Decision.NOTICE_WHEN_IDLE
    return Decision.DELIVER_NOW if words else Decision.NOTICE_NOW
