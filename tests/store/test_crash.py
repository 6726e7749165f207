"""kill -9 after a write returned loses nothing (a real process, stopped by its pid)."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from crosstalk.errors import DamagedState
from crosstalk.store.db import check_database, open_store
from crosstalk.store.migrations import LATEST_VERSION
from crosstalk.store.settings import get_setting
from tests.store.helpers import make_valid_db

WRITER = """
import sys, trio
from pathlib import Path
from crosstalk.store.db import open_store
from crosstalk.store.settings import set_setting

async def main() -> None:
    async with open_store(Path(sys.argv[1])) as store:
        for n in range(20):
            await store.write(lambda conn, n=n: set_setting(conn, f"op{n}", n))
        print("acknowledged", flush=True)
        await trio.sleep_forever()  # wait here to be killed

trio.run(main)
"""


async def _run_writer_and_kill(path: Path) -> None:
    """Start the writer, wait (bounded) for its acknowledgement line, then SIGKILL it by pid."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        seen = b""
        with trio.fail_after(30):
            while b"\n" not in seen:
                chunk = await proc.stdout.receive_some(100)
                assert chunk, "the writer exited before acknowledging"
                seen += chunk
        assert seen.strip() == b"acknowledged"
    finally:
        proc.send_signal(signal.SIGKILL)
        with trio.fail_after(30):
            await proc.wait()
        await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.e2e
async def test_kill_9_after_acknowledged_writes_loses_nothing(tmp_path: Path) -> None:
    """Every write acknowledged before a SIGKILL is there when the store is opened again."""
    path = tmp_path / "state.db"
    await _run_writer_and_kill(path)
    assert (tmp_path / "state.db-wal").exists(), "the crash should leave the WAL behind"
    assert check_database(path) == LATEST_VERSION
    async with open_store(path) as store:
        values = await store.read(lambda conn: [get_setting(conn, f"op{n}") for n in range(20)])
    assert values == list(range(20))


def _crash_copy(source: Path, target: Path) -> None:
    """Copy a database and its WAL while a connection holds uncheckpointed writes (a crash)."""
    conn = sqlite3.connect(source, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("INSERT INTO settings VALUES ('late', '1')")
        for suffix in ("", "-wal", "-shm"):
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    finally:
        conn.close()


def test_damaged_file_beside_a_leftover_wal_is_refused_untouched(tmp_path: Path) -> None:
    """A crash leftover WAL next to a truncated main file: refused, the main file unchanged."""
    source = tmp_path / "source.db"
    make_valid_db(source)
    path = tmp_path / "state.db"
    _crash_copy(source, path)
    assert (tmp_path / "state.db-wal").stat().st_size > 0
    path.write_bytes(path.read_bytes()[: 3 * 4096])
    before = path.read_bytes(), path.stat().st_mtime_ns
    with pytest.raises(DamagedState, match=r"state\.db"):
        check_database(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_valid_database_with_a_leftover_wal_checks_and_keeps_its_last_write(
    tmp_path: Path,
) -> None:
    """After a crash, the check reads through the WAL and the last commit is still there."""
    source = tmp_path / "source.db"
    make_valid_db(source)
    path = tmp_path / "state.db"
    _crash_copy(source, path)
    assert check_database(path) == LATEST_VERSION
    conn = sqlite3.connect(path)
    try:
        assert get_setting(conn, "late") == 1
    finally:
        conn.close()
