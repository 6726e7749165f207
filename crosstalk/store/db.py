"""The daemon's SQLite database, ``state.db``, and the one way to change it.

Everything that must survive a restart lives here (DESIGN.md §4). The rule this module exists for
is *nothing acknowledged is ever lost*: callers acknowledge an inbound op to the relay, or return
from a send, only after ``await store.write(...)`` has returned, and ``write`` returns only after
SQLite's ``COMMIT`` has returned with ``synchronous=FULL`` in WAL mode, i.e. after the commit is on
disk. (``write(durable=False)`` skips that fsync for a transaction that acknowledges nothing and
can be redone from what is durable: a room applying ops the link recorded.)

sqlite3 blocks, and every transaction runs inline, on the event loop's own thread: a deliberate,
measured exception to "no blocking calls", as the relay makes for its commits (relay/server.py
``_commit``). A message's path crosses about five store calls per daemon; in a worker thread each
paid the hand-off (0.08 ms on an idle machine) and then fought the busy event loop for the GIL
while it ran its Python (the open, verify and apply of an op is Python), which on this 2-core
machine stretched single transactions from 0.5 ms to 2-4 ms and gave send → held most of its
tail. Inline, a WAL commit with ``synchronous=FULL`` (its fsync included) blocks the loop for
about 0.4 ms, and the longest transactions (a catch-up batch of ``BATCH`` ops) for tens of ms,
far under any heartbeat or timeout. Tests and tools may still pass ``run_sync=`` (a worker thread,
or the simulation's runner).

Writes run on one connection, one at a time (``CapacityLimiter(1)``). Reads run on a second
connection with its own limiter: in WAL mode a reader sees the last committed state and never
waits for a writer (that matters when ``run_sync`` is a worker thread). A read that starts after
``write`` returned sees what that write committed. A transaction that has started always finishes
(commit or rollback) before ``write`` returns or raises, and its caller then gets its result, so
a cancelled caller never leaves a half-done transaction behind nor misses a commit it made.
"""

from __future__ import annotations

import inspect
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio

from crosstalk import sim_hooks
from crosstalk.errors import DamagedState, LocalProtocolError, StorageFull
from crosstalk.store.files import PRIVATE_FILE_MODE, damaged
from crosstalk.store.migrations import LATEST_VERSION, migrate, newer_than_known

R = TypeVar("R")

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_SIZE = 100
BUSY_TIMEOUT_S = 10.0

# How a blocking SQLite call is run: ``run_sync(fn, *args, limiter=...)``. Production runs it inline
# (see the module docstring); ``trio.to_thread.run_sync`` fits too, and the deterministic
# simulation (tests/sim) passes its own inline runner that may also delay it in virtual time.
RunSync = Callable[..., Awaitable[Any]]


async def run_inline(
    fn: Callable[..., R], *args: Any, limiter: trio.CapacityLimiter | None = None
) -> R:
    """Call ``fn(*args)`` on this thread: the store's default :data:`RunSync`.

    Cancellation is looked at only before the call. Afterwards the caller always gets the
    result (a commit it made is never reported as cancelled), and the shielded checkpoint lets
    other tasks run, so a task looping over store calls still yields.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    if limiter is None:
        result = fn(*args)
    else:
        try:
            # Free unless another ``run_sync`` holds it in a thread. ``async with limiter``
            # would yield to the scheduler before the call as well as after it: a second pass
            # over every ready task for each of the store calls on a message's path.
            limiter.acquire_nowait()
        except trio.WouldBlock:
            await limiter.acquire()  # a call in a thread holds it: wait for it to finish
        try:
            result = fn(*args)
        finally:
            limiter.release()
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


def _side_files(path: Path) -> tuple[Path, Path]:
    """SQLite's WAL and shared-memory files that sit beside ``path``."""
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _check_header(path: Path) -> None:
    """Refuse, by reading 100 bytes ourselves, a file that is plainly not a SQLite database."""
    try:
        with path.open("rb") as handle:
            header = handle.read(SQLITE_HEADER_SIZE)
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or exc})") from None
    if not header:
        return  # An empty file is a new database to SQLite; opening it creates the schema.
    if not header.startswith(SQLITE_MAGIC):
        raise damaged(path, "does not parse: it is not a SQLite database")
    if len(header) < SQLITE_HEADER_SIZE:
        raise damaged(path, "does not parse: it is truncated inside the SQLite header")


def check_database(path: Path) -> int | None:
    """Check that ``state.db`` parses and is a schema we know, without changing a byte of it.

    Opens the file read-only (``mode=ro`` URI). When no ``-wal`` file exists, the main file is
    the whole database, so it is also opened ``immutable=1``: SQLite then creates no ``-wal`` or
    ``-shm`` file beside a file it may be about to call damaged. ``PRAGMA quick_check`` walks every
    page, which catches truncation and corruption beyond the header.

    Returns:
        The schema version, or ``None`` when there is no database yet.

    Raises:
        DamagedState: naming the file, when it is not a valid SQLite database or was written
            by a newer crosstalk. The file is left untouched.
    """
    if not path.exists():
        return None
    _check_header(path)
    wal, _shm = _side_files(path)
    uri = path.absolute().as_uri() + "?mode=ro"
    if not wal.exists():
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.Error as exc:
        raise damaged(path, f"cannot be opened: {exc}") from None
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise damaged(path, f"does not parse: {exc}") from None
    finally:
        conn.close()
    if problems != ["ok"]:
        raise damaged(path, f"does not parse: {'; '.join(map(str, problems[:3]))}")
    if version > LATEST_VERSION:
        raise newer_than_known(path.name, version)
    return version


def _make_private(path: Path) -> None:
    """Create ``path`` 0600 if missing, tighten it if looser, and likewise its side files."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
        os.close(fd)
    for each in (path, *_side_files(path)):
        try:
            if each.stat().st_mode & 0o777 != PRIVATE_FILE_MODE:
                each.chmod(PRIVATE_FILE_MODE)
        except FileNotFoundError:
            continue


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) ``state.db`` for the daemon, with our pragmas, migrated.

    The caller must have run :func:`check_database` first, so a damaged file is never written.
    """
    _make_private(path)
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S
    )
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise DamagedState(f"{path.name} at {path} cannot be put in WAL mode (got {mode}).")
        # synchronous=FULL: in WAL mode, NORMAL skips the fsync of the WAL at each commit, so a
        # power loss can undo a transaction that already returned. We acknowledge ops to the relay
        # and return from sends right after COMMIT, so the commit must already be on disk.
        # (https://www.sqlite.org/pragma.html#pragma_synchronous)
        conn.execute("PRAGMA synchronous = FULL")
        # macOS: plain fsync stops at the drive cache; these are no-ops elsewhere.
        conn.execute("PRAGMA fullfsync = ON")
        conn.execute("PRAGMA checkpoint_fullfsync = ON")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, path_name=path.name)
    except BaseException:
        conn.close()
        raise
    _make_private(path)  # the -wal and -shm files exist now
    return conn


def connect_reader(path: Path) -> sqlite3.Connection:
    """A second connection to an opened (and migrated) ``state.db``, for :meth:`Store.read`.

    WAL mode is a property of the file, so this connection reads in WAL mode too: its reads see
    the last committed transaction and never block the writer, nor wait for it.
    """
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_S
    )
    try:
        # Not ``query_only``: the contract of ``read`` is that anything written there is rolled
        # back, and a write attempted there takes the write lock only until that rollback.
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _run_write(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], R], durable: bool = True
) -> R:
    """Run ``fn`` in ``BEGIN IMMEDIATE … COMMIT``; roll back if anything raises."""
    if not durable:
        conn.execute("PRAGMA synchronous = NORMAL")  # this commit only (Store.write)
        try:
            return _run_write(conn, fn)
        finally:
            conn.execute("PRAGMA synchronous = FULL")
    conn.execute("BEGIN IMMEDIATE")
    try:
        if sim_hooks.buggify("store.disk_full"):  # only in the simulation: no room left
            raise sqlite3.OperationalError("database or disk is full")
        result = fn(conn)
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            raise LocalProtocolError("store.write() takes a plain function, not an async one")
        if not conn.in_transaction:
            raise LocalProtocolError("the function passed to store.write() ended the transaction")
        if sim_hooks.buggify("store.commit_fails"):  # only in the simulation: COMMIT fails
            raise sqlite3.OperationalError("disk I/O error")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _run_read(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], R]) -> R:
    """Run ``fn`` in one read transaction, so it sees one consistent snapshot."""
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str = "part") -> Iterator[None]:
    """A part of a write transaction that fails alone: if the block raises, what it wrote is
    rolled back (the rest of the transaction stays) and the exception propagates."""
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


class Store:
    """The daemon's handle on ``state.db``: one connection, one transaction at a time.

    Open it with ``async with open_store(path) as store`` (or ``await Store.open(path)`` and
    ``await store.close()``).
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        reader: sqlite3.Connection | None = None,
        *,
        run_sync: RunSync = run_inline,
    ) -> None:
        self._conn: sqlite3.Connection | None = conn
        self.path = path
        self._run_sync = run_sync
        self._limiter = trio.CapacityLimiter(1)
        # Without a reader connection, reads share the writer's connection and limiter.
        self._reader: sqlite3.Connection | None = reader
        self._read_limiter = trio.CapacityLimiter(1) if reader is not None else self._limiter

    @classmethod
    async def open(
        cls, path: Path, *, run_sync: RunSync = run_inline, open_on: RunSync | None = None
    ) -> Store:
        """Check, open and migrate ``path``; refuse a damaged or too-new file without writing it.

        ``run_sync`` runs each blocking SQLite call (inline unless the caller says otherwise);
        ``open_on``, if given, runs the opening itself (a fresh file's migrations take a while,
        and a starting daemon's event loop has its control socket to answer meanwhile).

        Raises:
            DamagedState: the file does not parse or is newer than this code.
        """

        def opening() -> tuple[sqlite3.Connection, sqlite3.Connection]:
            check_database(path)
            conn = connect(path)
            try:
                return conn, connect_reader(path)
            except BaseException:
                conn.close()
                raise

        conn, reader = await (open_on or run_sync)(opening)
        return cls(conn, path, reader, run_sync=run_sync)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LocalProtocolError(f"the store for {self.path.name} is closed")
        return self._conn

    async def write(self, fn: Callable[[sqlite3.Connection], R], *, durable: bool = True) -> R:
        """Run ``fn(conn)`` in one write transaction and return its result after the commit.

        This is the commit-before-acknowledge helper. When ``await store.write(fn)`` returns,
        what ``fn`` wrote is committed and on disk; only then may the caller acknowledge
        (ack an op to the relay, return from a send, answer a control request). If ``fn`` raises,
        everything it wrote is rolled back and the exception propagates.

        ``durable=False`` commits with ``synchronous=NORMAL`` (no fsync of the WAL): safe against
        a crash of the process, but an OS crash or power loss may undo it, along with every commit
        after it until the next durable one (the WAL is appended in order, so a durable commit's
        fsync makes every commit before it durable too). Only for a transaction that can be
        redone from what is already durable (a room applying ops the link recorded), and whose
        caller tells nobody anything a rollback would make false.

        ``fn`` must be a plain (not async) function that only uses ``conn`` (it may run in a
        worker thread, see ``run_sync``), and must not commit or roll back itself. Cancelling
        the caller never interrupts a transaction that has started; it finishes first.
        """
        conn = self._connection()
        try:
            result: R = await self._run_sync(_run_write, conn, fn, durable, limiter=self._limiter)
            if sim_hooks.buggify("store.after_commit"):
                # Only in the simulation: the process may die after COMMIT, before anyone hears.
                await sim_hooks.fire("store.after_commit")
            if sim_hooks.buggify("store.slow_fsync"):  # only in the simulation: a slow disk
                await sim_hooks.fire("store.slow_fsync")
            return result
        except sqlite3.OperationalError as exc:
            if "full" not in str(exc) and "I/O" not in str(exc):
                raise
            # Nothing was committed (the transaction rolled back): say so, plainly, and where.
            raise StorageFull(
                f"Could not save to {self.path.parent}: {exc}. Nothing was sent or "
                "acknowledged; free some space and try again."
            ) from None

    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``fn(conn)`` against one consistent snapshot and return its result.

        It runs on the read connection (when the store has one), so it does not wait for a write
        in progress; it sees everything committed before it started. Anything ``fn`` writes is
        rolled back: use :meth:`write` to change state.
        """
        conn = self._connection()
        reader = self._reader if self._reader is not None else conn
        result: R = await self._run_sync(_run_read, reader, fn, limiter=self._read_limiter)
        return result

    async def close(self) -> None:
        """Close the connection once any running transaction has finished. Idempotent."""
        conn, self._conn = self._conn, None
        reader, self._reader = self._reader, None
        if conn is None:
            return
        # Shielded: the connections must be closed even if our caller is being cancelled.
        with trio.CancelScope(shield=True):
            if reader is not None:
                await self._run_sync(reader.close, limiter=self._read_limiter)
            await self._run_sync(conn.close, limiter=self._limiter)


@asynccontextmanager
async def open_store(path: Path, *, run_sync: RunSync = run_inline) -> AsyncIterator[Store]:
    """Open the store at ``path`` for the duration of the block, then close it."""
    store = await Store.open(path, run_sync=run_sync)
    try:
        yield store
    finally:
        await store.close()
