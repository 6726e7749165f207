"""Tool profiles: which MCP tools ``crosstalk server --tools SPEC`` serves (stdlib only).

Every tool's schema sits in the agent's context for the whole session (``tools/list``), so a
person can serve fewer. A spec is a comma-separated list; each item is a profile name or a tool
name, and the server serves their union, in its own order:

- ``full`` (the default): every tool the server has, including tools added after this was
  written;
- ``core``: :data:`CORE`, the handful an agent uses every day;
- a tool's name, ``crosstalk_send`` or ``send`` for short.

An unknown item is a :class:`~crosstalk.errors.UsageError` naming it and listing the valid ones.
The front end (:mod:`crosstalk.mcp.front`), the SDK server and ``crosstalk install CLIENT --tools``
all resolve a spec here, against the server's tool names, so they never disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from crosstalk.errors import UsageError

FULL = "full"
PREFIX = "crosstalk_"

CORE: tuple[str, ...] = (
    "crosstalk_send",
    "crosstalk_read",
    "crosstalk_answer",
    "crosstalk_rooms",
    "crosstalk_facts",
    "crosstalk_tasks",
    "crosstalk_task_claim",
)
"""The tools every notice and the working set point an agent at (``crosstalk_read`` for
arrivals, ``crosstalk_rooms`` for invitations, ``crosstalk_facts`` and ``crosstalk_tasks`` for
what did not fit in the working set), the two ways of writing back (``crosstalk_send``, with an
intent of ``question`` when it wants a reply, and ``crosstalk_answer`` for someone's
``crosstalk_ask``), and claiming a task. Left out, with their reasons: ``crosstalk_ask`` blocks
the agent for up to two minutes (a ``question`` sent with ``crosstalk_send`` gets its answer as a
notice); reservations are shown by the working set and by edit awareness, and
``crosstalk_reserve``'s schema alone is a twelfth of the full listing. Add any of them by name:
``--tools core,crosstalk_ask,crosstalk_reserve``. Measured on docs/performance.md."""

PROFILES: dict[str, tuple[str, ...] | None] = {FULL: None, "core": CORE}
"""Profile name -> its tools (None: every tool)."""


def _item_names(item: str, known: Sequence[str]) -> tuple[str, ...]:
    if item in PROFILES:
        chosen = PROFILES[item]
        return tuple(known) if chosen is None else chosen
    name = item if item.startswith(PREFIX) else PREFIX + item
    if name in known:
        return (name,)
    raise UsageError(
        f"--tools: {item!r} is neither a profile nor a tool; choose from the profiles "
        f"{', '.join(PROFILES)} or the tools {', '.join(known)}."
    )


def select(spec: str, known: Sequence[str]) -> tuple[str, ...]:
    """The tools of ``known`` (the server's names, in its order) that ``spec`` serves.

    Raises:
        UsageError: ``spec`` is empty or names something that is neither a profile nor a tool.
    """
    items = [item.strip() for item in spec.split(",")]
    if not any(items):
        raise UsageError(f"--tools needs a profile ({', '.join(PROFILES)}) or tool names.")
    wanted: set[str] = set()
    for item in items:
        if item:
            wanted.update(_item_names(item, known))
    return tuple(name for name in known if name in wanted)


def normalized(spec: str, known: Sequence[str]) -> str:
    """``spec`` as ``crosstalk install`` writes it: each item once, tools by their full names,
    profiles by name (so ``core`` keeps meaning :data:`CORE` as it changes); ``full`` when any
    item is ``full``.

    Raises:
        UsageError: as :func:`select`.
    """
    select(spec, known)
    items: list[str] = []
    for item in (each.strip() for each in spec.split(",")):
        name = item if item in PROFILES or item.startswith(PREFIX) else PREFIX + item
        if item and name not in items:
            items.append(name)
    return FULL if FULL in items else ",".join(items)
