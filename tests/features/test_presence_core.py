"""The presence publisher: which rooms are told our sessions, and when (sans-IO, synchronous)."""

from __future__ import annotations

import attrs

from crosstalk.core.gate_routing import SESSION_TTL
from crosstalk.core.triage import SessionStatus
from crosstalk.features.presence.core import REFRESH, Publisher, published


@attrs.frozen
class S:
    name: str
    project: str
    status: SessionStatus
    last_seen: float


def test_only_live_sessions_are_published_with_a_bare_project_name() -> None:
    """A path never leaves the machine; a session not heard from for a lifetime is left out."""
    now = 10 * SESSION_TTL
    op = published(
        [S("a", "/home/ana/src/api", SessionStatus.BUSY, now - 1.0),
         S("old", "/x", SessionStatus.IDLE, now - SESSION_TTL - 1.0)],
        now,
    )
    assert [(s.name, s.project, s.status) for s in op.sessions] == [("a", "api", "busy")]


def test_a_room_is_told_once_per_change_and_again_after_the_refresh() -> None:
    """A new room is due; a last_seen-only change is not; a status change or REFRESH is."""
    pub = Publisher()
    first = published([S("a", "/p", SessionStatus.BUSY, 100.0)], 100.0)
    assert pub.due(["r1", "r2"], first, 100.0) == ["r1", "r2"]
    pub.posted("r1", first, 100.0)
    pub.posted("r2", first, 100.0)
    seen_again = published([S("a", "/p", SessionStatus.BUSY, 150.0)], 150.0)
    assert pub.due(["r1", "r2"], seen_again, 150.0) == []
    idle = published([S("a", "/p", SessionStatus.IDLE, 160.0)], 160.0)
    assert pub.due(["r1"], idle, 160.0) == ["r1"]
    assert pub.due(["r2"], seen_again, 100.0 + REFRESH) == ["r2"]
    pub.forget_others(["r2"])
    assert pub.due(["r1"], first, 101.0) == ["r1"]
