"""A new store gets the schema every migration makes, at once: the same tables, indexes,
triggers and rows as the replay, and the migrations after the snapshot still run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crosstalk.store import migrations, schema_now, schema_snapshot
from crosstalk.store.db import connect
from crosstalk.store.migrations import LATEST_VERSION, MIGRATIONS, Migration, migrate


def _everything(conn: sqlite3.Connection) -> dict[str, object]:
    """The schema (every object's SQL) and every row of every table, shadow tables included."""
    master = sorted(
        conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
        key=lambda row: (row[0], row[1]),
    )
    tables = [name for kind, name, _, _ in master if kind == "table"]
    rows = {
        name: sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
        for name in tables if not name.startswith("sqlite_")
        or name == "sqlite_sequence"
    }
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    return {"master": master, "rows": rows, "version": version}


def _new(path: Path, *, replay: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, replay=replay)
    return conn


def test_the_snapshot_is_current() -> None:
    """Fails until ``python -m crosstalk.store.schema_snapshot --write`` ran after a new step."""
    assert schema_now.VERSION == LATEST_VERSION
    assert schema_snapshot.render() == schema_snapshot.TARGET.read_text()


def test_a_new_store_is_what_the_replay_makes(tmp_path: Path) -> None:
    at_once = _new(tmp_path / "at_once.db", replay=False)
    replayed = _new(tmp_path / "replayed.db", replay=True)
    assert _everything(at_once) == _everything(replayed)
    assert _everything(at_once)["version"] == LATEST_VERSION


def test_the_comparison_sees_a_missing_index(tmp_path: Path) -> None:
    """Planted: a snapshot that lost one statement is told apart from the replay."""
    at_once = _new(tmp_path / "at_once.db", replay=False)
    replayed = _new(tmp_path / "replayed.db", replay=True)
    at_once.execute("DROP INDEX contacts_by_label")
    assert _everything(at_once) != _everything(replayed)


def test_the_snapshot_is_one_transaction(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    commits: list[str] = []
    conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    assert migrate(conn) == list(range(1, LATEST_VERSION + 1))
    assert len(commits) == 1


def test_steps_after_the_snapshot_still_run(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot older than the code (a step added, not yet regenerated) is followed by it."""
    extra = Migration(LATEST_VERSION + 1, "a step after the snapshot",
                      ("CREATE TABLE later (x INTEGER)",))
    steps = (*MIGRATIONS, extra)
    monkeypatch.setattr(migrations, "MIGRATIONS", steps)
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    assert migrate(conn, steps) == list(range(1, LATEST_VERSION + 2))
    assert conn.execute("SELECT count(*) FROM later").fetchone()[0] == 0
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION + 1


def test_an_old_store_still_steps_up(tmp_path: Path) -> None:
    """A store at an old version is migrated step by step, never given the snapshot."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    migrate(conn, MIGRATIONS[:5])
    conn.execute("INSERT INTO settings (key, value) VALUES ('kept', '1')")
    assert migrate(conn) == list(range(6, LATEST_VERSION + 1))
    assert conn.execute("SELECT value FROM settings WHERE key = 'kept'").fetchone() == ("1",)


def test_the_daemon_store_opens_new_at_the_latest_version(tmp_path: Path) -> None:
    conn = connect(tmp_path / "state.db")
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        conn.execute("INSERT INTO settings (key, value) VALUES ('a', '1')")
    finally:
        conn.close()
