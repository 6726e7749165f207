"""Small formatters every section of the performance page shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = list[str]  # one row of a table, its cells in order
Result = Callable[[str], dict[str, Any]]  # a benchmark's name → its result in this run


def ms(value: float) -> str:
    """Milliseconds, with three decimals below one."""
    return f"{value:.3f} ms" if value < 1 else f"{value:.1f} ms"


def ratio(value: float, base: float) -> str:
    """``value ÷ base`` as ``1.5×``, or a dash when there is no base."""
    return f"{value / base:.1f}×" if base > 0 else "—"


def table(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def failed(name: str, run: dict[str, Any]) -> str | None:
    """Why a benchmark has no figures in this run, or None when it has them."""
    if "error" in run:
        return f"**{name} failed in this run:**\n\n```\n{run['error']}\n```\n"
    if "skipped" in run:
        return f"*{name} did not run: {run['skipped']}.*\n"
    if "result" not in run:
        return f"*{name} did not run in this run.*\n"
    return None
