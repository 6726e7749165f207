"""Tables for memory (one migration step, appended in crosstalk/store/migrations.py)."""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = ()
