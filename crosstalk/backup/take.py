"""``crosstalk backup FILE``: one sealed file with this home's identity, state and settings.

It runs beside a live daemon and needs nothing from it. The identity comes through
:func:`~crosstalk.store.identity.load_identity` (from the OS keyring, when the keys live there).
``state.db`` is copied by SQLite's online backup API into a scratch directory inside the home
(0700, as private as ``state.db`` itself, and removed afterwards): ``Connection.backup`` with
``pages=-1`` copies the whole database in one step inside one read transaction, so in WAL mode
the copy is exactly the last commit before it began, and the daemon's writers neither wait nor
restart it. The copy is checked (``PRAGMA quick_check``) before it is sealed.

Memory stays bounded whatever the size of ``state.db``: SQLite copies page by page through its
own page cache (a few MiB), and the sealing reads and writes one ``CHUNK`` (1 MiB) at a time;
the largest allocation is argon2id's own ``memlimit`` (256 MiB, for about a second, before any
content is read). Disk: the scratch copy, and the sealed file, about the size of the state.
tests/backup/test_take_restore.py measures the Python side with tracemalloc (under 6 MiB for a
48 MB state). Measured once through the CLI on a 200 MB ``state.db`` (2 cores): backup 3.8 s,
restore 2.3 s, each with a peak RSS of 290 MB, which is argon2id's 256 MiB and the interpreter.

The file is written to a temporary name beside ``FILE`` (0600 from ``mkstemp``), fsynced,
renamed over ``FILE`` and the directory fsynced, so ``FILE`` is never half written.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import attrs

from crosstalk.backup.manifest import FILES, KEYS_IN_FILE, STATE, Entry, Manifest, manifest_bytes
from crosstalk.backup.sealed import CHUNK, MODERATE, KdfLimits, SealedWriter
from crosstalk.errors import CannotStart, DamagedState, NotSetUp
from crosstalk.paths import Home
from crosstalk.store.db import BUSY_TIMEOUT_S, check_database
from crosstalk.store.files import PRIVATE_FILE_MODE, fsync_directory
from crosstalk.store.identity import load_identity, stored_in_keyring
from crosstalk.store.keyring_store import KEYRING


@attrs.frozen
class Taken:
    """What ``backup`` answers: the file written and its size in bytes."""

    file: str
    bytes: int


def snapshot_database(source: Path, target: Path) -> None:
    """Copy ``source`` to a new file ``target`` as of one commit, while others may write it.

    The copy is left in rollback-journal mode, one self-contained file; the daemon that opens
    it after a restore puts it back in WAL mode.

    Raises:
        DamagedState: ``source`` (or the copy) is not a sound SQLite database.
    """
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    os.close(fd)
    try:
        # A plain connection, not ``mode=ro``: a read-only one cannot remove the -wal and -shm
        # files it creates beside a database nobody else has open, and would leave them behind.
        src = sqlite3.connect(source, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        try:
            dst = sqlite3.connect(target, isolation_level=None)
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode = DELETE")
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as exc:
        raise DamagedState(
            f"state.db at {source} could not be copied ({exc}); it was left untouched."
        ) from None
    check_database(target)


def take_backup(
    home: Home,
    dest: Path,
    passphrase: str,
    *,
    limits: KdfLimits = MODERATE,
    now: Callable[[], float] = time.time,
) -> Taken:
    """Seal ``home``'s identity, state and settings into ``dest`` under ``passphrase``.

    Raises:
        NotSetUp: the home has no identity.
        BadPassphrase: the passphrase is empty.
        DamagedState: ``identity.json`` or ``state.db`` does not parse (nothing is written).
        NoKeyring: the keys are in an OS keyring that is not reachable now.
        CrosstalkError: ``cannot_start``, when ``dest`` cannot be written.
    """
    record = load_identity(home.identity)
    if record is None:
        raise NotSetUp(f"{home.root} has no identity to back up yet.")
    keys_in = KEYRING if stored_in_keyring(home.identity) else KEYS_IN_FILE
    with tempfile.TemporaryDirectory(prefix=".backup-", dir=home.root) as scratch_name:
        scratch = Path(scratch_name)
        entries: list[Entry] = []
        for name in FILES:
            copy = scratch / name
            if name == STATE:
                if not home.database.exists():
                    continue
                snapshot_database(home.database, copy)
            elif not _copy_if_present(home.root / name, copy):
                continue
            entries.append(Entry(name, copy.stat().st_size))
        manifest = Manifest(record, keys_in, now(), tuple(entries))

        def fill(out: BinaryIO) -> None:
            writer = SealedWriter(out, passphrase, manifest_bytes(manifest), limits=limits)
            for entry in entries:
                with (scratch / entry.name).open("rb") as source:
                    while piece := source.read(CHUNK):
                        writer.write(piece)
            writer.finish()

        written = _write_atomic(dest, fill)
    return Taken(file=str(dest), bytes=written)


def _copy_if_present(source: Path, target: Path) -> bool:
    try:
        shutil.copyfile(source, target)
    except FileNotFoundError:
        return False
    target.chmod(PRIVATE_FILE_MODE)
    return True


def _write_atomic(dest: Path, fill: Callable[[BinaryIO], None]) -> int:
    """Write ``dest`` through ``fill`` under a temporary name, then rename; its size."""
    try:
        fd, temp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as exc:
        raise CannotStart(
            f"Could not write the backup to {dest}: {exc.strerror or exc}."
        ) from None
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fchmod(out.fileno(), PRIVATE_FILE_MODE)
            os.fsync(out.fileno())
            size = out.tell()
        os.replace(temp_name, dest)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    fsync_directory(dest.parent)
    return size
