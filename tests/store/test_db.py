"""state.db: pragmas, file modes, commit-before-return writes, damaged files left alone."""

from __future__ import annotations

import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from crosstalk.errors import DamagedState, LocalProtocolError
from crosstalk.store.db import Store, _run_write, check_database, open_store
from crosstalk.store.migrations import LATEST_VERSION
from crosstalk.store.settings import get_setting, set_setting
from tests.store.helpers import DAMAGED_DB_MAKERS, FileSnapshot, make_valid_db, set_user_version


def independent_read(path: Path, key: str) -> object:
    """Read a setting through a second, separate connection (what another process would see)."""
    conn = sqlite3.connect(path)
    try:
        return get_setting(conn, key)
    finally:
        conn.close()


async def test_open_creates_a_wal_database_with_durable_pragmas(tmp_path: Path) -> None:
    """The store's connection is in WAL mode, synchronous=FULL, foreign keys on."""
    async with open_store(tmp_path / "state.db") as store:
        pragmas = await store.read(
            lambda conn: tuple(
                conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "foreign_keys", "user_version")
            )
        )
    assert pragmas == ("wal", 2, 1, LATEST_VERSION)


async def test_database_and_side_files_are_0600(tmp_path: Path) -> None:
    """state.db and its -wal and -shm files are readable by the owner only."""
    path = tmp_path / "state.db"
    async with open_store(path) as store:
        await store.write(lambda conn: set_setting(conn, "k", 1))
        files = [path, tmp_path / "state.db-wal", tmp_path / "state.db-shm"]
        assert all(p.exists() for p in files)
        assert [stat.S_IMODE(p.stat().st_mode) for p in files] == [0o600] * 3


async def test_write_is_committed_when_it_returns(tmp_path: Path) -> None:
    """Right after `await store.write` returns, an independent connection sees the row."""
    path = tmp_path / "state.db"
    async with open_store(path) as store:
        await store.write(lambda conn: set_setting(conn, "relay.url", "ws://127.0.0.1:9"))
        assert independent_read(path, "relay.url") == "ws://127.0.0.1:9"


async def test_write_returns_the_function_result(tmp_path: Path) -> None:
    """write hands back whatever the function returned."""
    async with open_store(tmp_path / "state.db") as store:
        rowid = await store.write(
            lambda conn: conn.execute("INSERT INTO settings VALUES ('a', '1')").lastrowid
        )
    assert rowid == 1


class Boom(Exception):
    """The failure a test function raises on purpose."""


async def test_failed_write_rolls_back_everything(tmp_path: Path) -> None:
    """If the function raises, none of its writes are visible and the error propagates."""
    path = tmp_path / "state.db"

    def half_then_fail(conn: sqlite3.Connection) -> None:
        set_setting(conn, "first", 1)
        raise Boom

    async with open_store(path) as store:
        with pytest.raises(Boom):
            await store.write(half_then_fail)
        assert await store.read(lambda conn: get_setting(conn, "first")) is None
        await store.write(lambda conn: set_setting(conn, "after", 2))  # the store still works
    assert independent_read(path, "first") is None
    assert independent_read(path, "after") == 2


def _synchronous(conn: sqlite3.Connection) -> int:
    """``PRAGMA synchronous`` of ``conn`` (1 NORMAL, 2 FULL): what its next COMMIT does."""
    level: int = conn.execute("PRAGMA synchronous").fetchone()[0]
    return level


async def test_a_write_that_need_not_be_durable_commits_without_fsync_that_once(
    tmp_path: Path,
) -> None:
    """``durable=False`` runs its transaction under synchronous=NORMAL (its COMMIT does not
    fsync the WAL) and commits all the same; the writes before and after it, and one after a
    failed non-durable write, are FULL again."""
    path = tmp_path / "state.db"
    levels: list[int] = []

    def noting(conn: sqlite3.Connection) -> None:
        levels.append(_synchronous(conn))
        set_setting(conn, f"w{len(levels)}", 1)

    def failing(conn: sqlite3.Connection) -> None:
        noting(conn)
        raise Boom

    async with open_store(path) as store:
        await store.write(noting)
        await store.write(noting, durable=False)
        with pytest.raises(Boom):
            await store.write(failing, durable=False)
        await store.write(noting)
        assert independent_read(path, "w2") == 1  # committed when write returned
    assert levels == [2, 1, 1, 2]
    assert independent_read(path, "w3") is None


async def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    """A room key for a room that does not exist is refused."""
    async with open_store(tmp_path / "state.db") as store:
        with pytest.raises(sqlite3.IntegrityError):
            await store.write(
                lambda conn: conn.execute(
                    "INSERT INTO room_keys (room_id, epoch, key) VALUES ('nope', 0, ?)",
                    (b"k" * 32,),
                )
            )


async def test_async_function_is_refused_and_nothing_commits(tmp_path: Path) -> None:
    """Passing an async function is a LocalProtocolError, not a silent empty commit."""

    async def wrong(conn: sqlite3.Connection) -> None:
        set_setting(conn, "k", 1)

    async with open_store(tmp_path / "state.db") as store:
        with pytest.raises(LocalProtocolError, match="not an async one"):
            await store.write(wrong)  # type: ignore[unused-coroutine]  # the misuse under test
        assert await store.read(lambda conn: get_setting(conn, "k")) is None


async def test_function_that_commits_itself_is_refused(tmp_path: Path) -> None:
    """A function that ends the transaction on its own is reported as a misuse."""
    async with open_store(tmp_path / "state.db") as store:
        with pytest.raises(LocalProtocolError, match="ended the transaction"):
            await store.write(lambda conn: conn.execute("COMMIT"))
        await store.write(lambda conn: set_setting(conn, "k", 1))
        assert await store.read(lambda conn: get_setting(conn, "k")) == 1


async def test_read_never_keeps_writes(tmp_path: Path) -> None:
    """Anything written inside read is rolled back."""
    async with open_store(tmp_path / "state.db") as store:
        await store.read(lambda conn: set_setting(conn, "sneaky", 1))
        assert await store.read(lambda conn: get_setting(conn, "sneaky")) is None


async def test_many_concurrent_writers_all_land(tmp_path: Path) -> None:
    """Fifty tasks writing at once all commit; no write is lost or mixed up."""
    path = tmp_path / "state.db"

    def writer(n: int) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: set_setting(conn, f"key{n}", {"n": n})

    async with open_store(path) as store:
        async with trio.open_nursery() as nursery:
            for n in range(50):
                nursery.start_soon(store.write, writer(n))
        count = await store.read(
            lambda conn: conn.execute("SELECT count(*) FROM settings").fetchone()[0]
        )
    assert count == 50
    assert [independent_read(path, f"key{n}") for n in (0, 17, 49)] == [
        {"n": 0},
        {"n": 17},
        {"n": 49},
    ]


async def test_cancelled_caller_does_not_interrupt_a_started_transaction(tmp_path: Path) -> None:
    """Cancelling a caller whose transaction is running in a worker thread lets it commit;
    nothing is half done."""
    path = tmp_path / "state.db"
    inside = trio.Event()
    release = threading.Event()

    def slow(conn: sqlite3.Connection) -> None:
        set_setting(conn, "k", "committed")
        trio.from_thread.run_sync(inside.set)
        assert release.wait(timeout=10), "the test never released the transaction"

    async with open_store(path, run_sync=trio.to_thread.run_sync) as store:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store.write, slow)
                await inside.wait()
                nursery.cancel_scope.cancel()
                release.set()
        assert independent_read(path, "k") == "committed"


async def test_inline_write_cancelled_while_running_still_returns_its_commit(
    tmp_path: Path,
) -> None:
    """Inline (the default), a cancel requested while the transaction runs reaches the caller
    only after it has the result of what was committed."""
    got: list[str] = []

    def cancelling(conn: sqlite3.Connection) -> str:
        set_setting(conn, "k", "committed")
        scope.cancel()
        return "done"

    async with open_store(tmp_path / "state.db") as store:
        with trio.CancelScope() as scope:
            got.append(await store.write(cancelling))
            await trio.lowlevel.checkpoint()  # the cancel is delivered here, not before
        assert scope.cancelled_caught
        assert got == ["done"]
        assert await store.read(lambda conn: get_setting(conn, "k")) == "committed"


async def test_inline_write_cancelled_before_it_starts_writes_nothing(tmp_path: Path) -> None:
    """A caller already cancelled when it calls ``write`` never starts its transaction."""
    async with open_store(tmp_path / "state.db") as store:
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.write(lambda conn: set_setting(conn, "k", "written"))
        assert scope.cancelled_caught
        assert await store.read(lambda conn: get_setting(conn, "k")) is None


class _Steps(trio.abc.Instrument):
    """Counts how many times ``task`` has been scheduled (each resumption after a yield)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task, self.count = task, 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.count += 1


async def test_an_inline_call_runs_before_any_other_task_and_yields_once_after(
    tmp_path: Path,
) -> None:
    """Inline, a store call does not hand the scheduler a pass before its transaction (taking
    the free limiter does not yield): the calling task is not rescheduled between the call
    and the transaction. It still checkpoints once after it, so other tasks get to run."""
    seen: list[int] = []
    steps = _Steps(trio.lowlevel.current_task())

    def write(conn: sqlite3.Connection) -> None:
        seen.append(steps.count)
        set_setting(conn, "k", "v")

    async with open_store(tmp_path / "state.db") as store:
        trio.lowlevel.add_instrument(steps)
        try:
            before = steps.count
            with trio.testing.assert_checkpoints():
                await store.write(write)
            after = steps.count
        finally:
            trio.lowlevel.remove_instrument(steps)
    assert seen == [before] and after == before + 1


async def test_an_inline_call_waits_for_a_call_running_in_a_thread(tmp_path: Path) -> None:
    """A store whose calls may also run in a thread (tests, tools): an inline call that finds
    the limiter taken waits for that call to finish before it starts its own transaction."""
    path = tmp_path / "state.db"
    inside = trio.Event()
    release = threading.Event()
    order: list[str] = []

    def slow(conn: sqlite3.Connection) -> None:
        trio.from_thread.run_sync(inside.set)
        assert release.wait(timeout=10), "the test never released the transaction"
        order.append("thread")

    def quick(conn: sqlite3.Connection) -> None:
        order.append("inline")

    async with open_store(path) as store:
        limiter = store._limiter  # the writer's, which both calls take

        async def in_thread() -> None:
            await trio.to_thread.run_sync(_run_write_of(store, slow), limiter=limiter)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(in_thread)
                await inside.wait()
                nursery.start_soon(store.write, quick)
                await trio.testing.wait_all_tasks_blocked()
                assert order == []  # the inline call waits on the limiter
                release.set()
    assert order == ["thread", "inline"]


def _run_write_of(store: Store, fn: Callable[[sqlite3.Connection], None]) -> Callable[[], None]:
    conn = store._connection()
    return lambda: _run_write(conn, fn)


async def test_closed_store_refuses_work_and_close_is_idempotent(tmp_path: Path) -> None:
    """After close, write raises LocalProtocolError; closing twice is fine."""
    store = await Store.open(tmp_path / "state.db")
    await store.close()
    await store.close()
    with pytest.raises(LocalProtocolError, match="closed"):
        await store.write(lambda conn: set_setting(conn, "k", 1))


async def test_reopening_keeps_data_and_schema(tmp_path: Path) -> None:
    """Closing and opening again finds the same rows at the same schema version."""
    path = tmp_path / "state.db"
    async with open_store(path) as store:
        await store.write(lambda conn: set_setting(conn, "k", [1, 2]))
    async with open_store(path) as store:
        assert await store.read(lambda conn: get_setting(conn, "k")) == [1, 2]
    assert check_database(path) == LATEST_VERSION


def test_check_database_reports_a_missing_file_as_none(tmp_path: Path) -> None:
    """No database yet is not damage, and checking does not create one."""
    assert check_database(tmp_path / "state.db") is None
    assert list(tmp_path.iterdir()) == []


def test_check_database_accepts_a_valid_database(tmp_path: Path) -> None:
    """A migrated database checks as its schema version."""
    make_valid_db(tmp_path / "state.db")
    assert check_database(tmp_path / "state.db") == LATEST_VERSION


@pytest.mark.parametrize("make", DAMAGED_DB_MAKERS.values(), ids=DAMAGED_DB_MAKERS.keys())
def test_check_database_refuses_damage_and_leaves_it_byte_identical(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """A damaged state.db is named in a DamagedState; bytes, mtime and neighbours are unchanged."""
    path = tmp_path / "state.db"
    make(path)
    before = FileSnapshot.of(path)
    with pytest.raises(DamagedState) as caught:
        check_database(path)
    assert caught.value.message.startswith("state.db at ")
    assert "does not parse" in caught.value.message
    assert "left untouched" in caught.value.message
    assert FileSnapshot.of(path) == before


@pytest.mark.parametrize("make", DAMAGED_DB_MAKERS.values(), ids=DAMAGED_DB_MAKERS.keys())
async def test_store_open_refuses_damage_without_writing(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    """Store.open on a damaged file raises DamagedState and creates or changes nothing."""
    path = tmp_path / "state.db"
    make(path)
    before = FileSnapshot.of(path)
    with pytest.raises(DamagedState, match=r"state\.db"):
        await Store.open(path)
    assert FileSnapshot.of(path) == before


async def test_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A database from a newer crosstalk is refused by check and open, and not modified."""
    path = tmp_path / "state.db"
    make_valid_db(path)
    set_user_version(path, LATEST_VERSION + 1)
    before = FileSnapshot.of(path)
    with pytest.raises(DamagedState, match="newer than this crosstalk knows"):
        check_database(path)
    with pytest.raises(DamagedState, match="Upgrade crosstalk"):
        await Store.open(path)
    assert FileSnapshot.of(path) == before


async def test_empty_file_is_a_new_database(tmp_path: Path) -> None:
    """A zero-byte state.db (a crash right after creating it) opens as a fresh database."""
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    async with open_store(path) as store:
        version = await store.read(lambda conn: conn.execute("PRAGMA user_version").fetchone()[0])
    assert version == LATEST_VERSION
