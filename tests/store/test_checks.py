"""check_state_files: one verdict per state file; damage names the file and refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.crypto import fingerprint
from crosstalk.errors import DamagedState
from crosstalk.paths import Home
from crosstalk.store import check_state_files, inspect_state_files
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.store.migrations import LATEST_VERSION
from tests.store.helpers import FileSnapshot, make_valid_db


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = Home(tmp_path / "home")
    home.ensure()
    return home


def verdicts(home: Home) -> list[tuple[str, bool]]:
    return [(check.name, check.ok) for check in inspect_state_files(home)]


def test_empty_home_is_fine_and_stays_empty(home: Home) -> None:
    """A new home has nothing to check yet; checking creates no files."""
    checks = check_state_files(home)
    assert [(c.name, c.ok, c.detail) for c in checks] == [
        ("state.db", True, "not created yet"),
        ("identity.json", True, "no identity yet"),
    ]
    assert list(home.root.iterdir()) == []


def test_good_files_report_version_and_who(home: Home) -> None:
    """With a database and an identity, details name the schema version and the fingerprint."""
    make_valid_db(home.database)
    record = IdentityRecord("alice", "laptop", bytes(32), bytes(range(32)), 1.0)
    save_identity(home.identity, record)
    details = [c.detail for c in check_state_files(home)]
    assert details == [
        f"schema version {LATEST_VERSION}",
        f"alice ({fingerprint(record.ed25519_public)})",
    ]


def test_damaged_identity_is_named_and_refused(home: Home) -> None:
    """check raises DamagedState naming identity.json; inspect marks only that file bad."""
    home.identity.write_text("{not json")
    before = FileSnapshot.of(home.identity)
    with pytest.raises(DamagedState, match=r"identity\.json"):
        check_state_files(home)
    assert verdicts(home) == [("state.db", True), ("identity.json", False)]
    assert FileSnapshot.of(home.identity) == before


def test_damaged_database_is_named_and_refused(home: Home) -> None:
    """check raises DamagedState naming state.db; the file is left as it was."""
    home.database.write_bytes(b"definitely not sqlite" * 10)
    before = FileSnapshot.of(home.database)
    with pytest.raises(DamagedState, match=r"state\.db"):
        check_state_files(home)
    bad = [c for c in inspect_state_files(home) if not c.ok]
    assert [(c.name, c.error is not None, "left untouched" in c.detail) for c in bad] == [
        ("state.db", True, True)
    ]
    assert FileSnapshot.of(home.database) == before
