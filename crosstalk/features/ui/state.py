"""What the page shows, gathered from the daemon's own ops (the same answers the CLI prints).

Each part is one op; a part whose op fails (no identity yet, a room catching up) carries
``{"error": {"code", "message"}}`` instead, so one failing view never blanks the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from crosstalk.errors import CrosstalkError

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

#: The page's parts: key -> (op, params).
PARTS: dict[str, tuple[str, dict[str, Any]]] = {
    "status": ("status", {}),
    "health": ("health", {}),
    "rooms": ("rooms", {}),
    "peers": ("peers", {}),
    "facts": ("facts", {"all": True}),
    "tasks": ("tasks", {"all": True}),
    "decisions": ("decisions", {}),
    "reservations": ("reservations", {}),
    "attention": ("attention", {}),
    "notices": ("notices", {}),
    "trust": ("trust", {}),
    "marks": ("ui_marks", {}),
}
#: The gate's record shows only the latest notices.
MAX_NOTICES = 200


async def snapshot(call: Call) -> dict[str, Any]:
    """Every part of the page's state, by key."""
    state: dict[str, Any] = {}
    for key, (op, params) in PARTS.items():
        try:
            state[key] = await call(op, dict(params))
        except CrosstalkError as exc:
            state[key] = {"error": {"code": exc.code, "message": exc.message}}
    notices = state["notices"].get("notices")
    if isinstance(notices, list):
        state["notices"]["notices"] = notices[-MAX_NOTICES:]
    return state
