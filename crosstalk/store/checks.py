"""Does every state file parse? For ``crosstalk doctor`` and for the daemon's refusal to start.

DESIGN.md §4: a state file that does not parse is never overwritten; the daemon refuses to start
and says which file and why. These checks only read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from crosstalk.crypto import fingerprint
from crosstalk.errors import DamagedState
from crosstalk.paths import Home
from crosstalk.store.db import check_database
from crosstalk.store.identity import load_identity


@attrs.frozen
class StateFileCheck:
    """The verdict on one state file: ``ok`` with a ``detail`` sentence, or the ``error``."""

    name: str
    path: Path
    ok: bool
    detail: str
    error: DamagedState | None = attrs.field(default=None, eq=False)


def _database_detail(path: Path) -> str:
    version = check_database(path)
    return "not created yet" if version is None else f"schema version {version}"


def _identity_detail(path: Path) -> str:
    record = load_identity(path)
    if record is None:
        return "no identity yet"
    return f"{record.label} ({fingerprint(record.ed25519_public)})"


def _check(name: str, path: Path, detail_of: Callable[[Path], str]) -> StateFileCheck:
    try:
        return StateFileCheck(name, path, True, detail_of(path))
    except DamagedState as exc:
        return StateFileCheck(name, path, False, exc.message, exc)


def inspect_state_files(home: Home) -> list[StateFileCheck]:
    """One verdict per state file (``state.db``, ``identity.json``); never raises for damage."""
    return [
        _check(home.database.name, home.database, _database_detail),
        _check(home.identity.name, home.identity, _identity_detail),
    ]


def check_state_files(home: Home) -> list[StateFileCheck]:
    """Every state file's verdict, all good; otherwise raise the first file's damage.

    Raises:
        DamagedState: naming the file that does not parse (it was left untouched).
    """
    checks = inspect_state_files(home)
    for check in checks:
        if check.error is not None:
            raise check.error
    return checks
