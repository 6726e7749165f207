"""Backing a home up and restoring it: everything comes back, nothing leaks, and a restore that
fails leaves the disk exactly as it was.

The homes here are real (a migrated ``state.db``, an ``identity.json`` through the store's own
writer); the KDF runs at libsodium's cheapest limits, which the header records like any others.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sqlite3
import stat
import tempfile
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import nacl.pwhash.argon2id as argon2id
import nacl.signing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.backup.restore import restore_backup
from crosstalk.backup.sealed import HEADER_SIZE, KdfLimits
from crosstalk.backup.take import take_backup
from crosstalk.crypto import fingerprint
from crosstalk.daemon.lock import DaemonLock, try_acquire
from crosstalk.errors import BadPassphrase, CrosstalkError, DamagedBackup, HomeInUse, NotSetUp
from crosstalk.paths import Home
from crosstalk.store.db import connect
from crosstalk.store.identity import IdentityRecord, load_identity, save_identity
from tests.conftest import SHORT_SCRATCH

FAST = KdfLimits(argon2id.OPSLIMIT_MIN, argon2id.MEMLIMIT_MIN)
PASS = "a long and winding passphrase"
SEED, BOX = bytes(range(32)), bytes(range(100, 132))
ROOM_KEY = hashlib.sha256(b"a room key kept in state.db").digest()


@pytest.fixture
def place() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ct-bk-", dir=SHORT_SCRATCH))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_home(
    root: Path,
    *,
    label: str = "ana",
    seeds: tuple[bytes, bytes] = (SEED, BOX),
    rows: list[bytes] | None = None,
    config: bytes | None = b'{"hand": "written"}',
) -> Home:
    """A home with an identity, a migrated state.db holding ``rows``, and maybe config.json."""
    home = Home(root)
    home.ensure()
    record = IdentityRecord(label, "laptop", seeds[0], seeds[1], 1_790_000_000.5)
    save_identity(home.identity, record)
    conn = connect(home.database)
    conn.execute("CREATE TABLE kept (n INTEGER PRIMARY KEY, value BLOB)")
    conn.execute("INSERT INTO kept (value) VALUES (?)", (ROOM_KEY,))
    conn.executemany("INSERT INTO kept (value) VALUES (?)", [(r,) for r in rows or []])
    conn.close()
    if config is not None:
        (root / "config.json").write_bytes(config)
    return home


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def listing(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under ``root`` with its mode and a hash of its bytes: the disk, as seen."""
    seen = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        seen[str(path.relative_to(root))] = (mode, digest)
    return seen


def forms(secret: bytes) -> list[bytes]:
    """``secret`` raw, in hex (both cases) and in base64 (standard, URL-safe, with and without
    padding): the forms a key could be written in."""
    b64 = [base64.b64encode(secret), base64.urlsafe_b64encode(secret)]
    return [secret, secret.hex().encode(), secret.hex().upper().encode(),
            *b64, *(b.rstrip(b"=") for b in b64)]  # fmt: skip


def test_a_home_comes_back_whole(place: Path) -> None:
    """Identity, state.db (row for row) and config.json come back; files 0600, home 0700."""
    home = make_home(place / "ana", rows=[b"x" * 5000] * 300)
    taken = take_backup(home, place / "ana.backup", PASS, limits=FAST)
    assert taken.file == str(place / "ana.backup")
    assert taken.bytes == (place / "ana.backup").stat().st_size
    assert stat.S_IMODE((place / "ana.backup").stat().st_mode) == 0o600

    target = Home(place / "elsewhere" / "deeper" / "ana")
    restored = restore_backup(place / "ana.backup", target, PASS)
    assert (restored.label, restored.storage) == ("ana", "file")
    assert restored.fingerprint == fingerprint(nacl.signing.SigningKey(SEED).verify_key.encode())
    assert load_identity(target.identity) == load_identity(home.identity)
    assert dump(target.database) == dump(home.database)
    assert (target.root / "config.json").read_bytes() == b'{"hand": "written"}'
    assert sorted(p.name for p in target.root.iterdir()) == [
        "config.json", "identity.json", "state.db"]  # fmt: skip
    assert stat.S_IMODE(target.root.stat().st_mode) == 0o700
    for path in target.root.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_the_backup_leaves_the_home_as_it_was(place: Path) -> None:
    """Taking a backup adds, changes and leaves behind nothing in the home."""
    home = make_home(place / "ana")
    before = listing(home.root)
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    assert listing(home.root) == before


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    label=st.text(min_size=1, max_size=30),
    seeds=st.tuples(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32)),
    rows=st.lists(st.binary(max_size=4000), max_size=20),
    config=st.none() | st.binary(max_size=3000),
)
def test_any_contents_round_trip(
    place: Path,
    label: str,
    seeds: tuple[bytes, bytes],
    rows: list[bytes],
    config: bytes | None,
) -> None:
    """Whatever the label, keys, rows and settings file, the restore gives them back."""
    work = Path(tempfile.mkdtemp(dir=place))
    home = make_home(work / "home", label=label, seeds=seeds, rows=rows, config=config)
    take_backup(home, work / "b", PASS, limits=FAST)
    target = Home(work / "restored")
    restored = restore_backup(work / "b", target, PASS)
    assert restored.label == label
    assert load_identity(target.identity) == load_identity(home.identity)
    assert dump(target.database) == dump(home.database)
    config_path = target.root / "config.json"
    assert (config_path.read_bytes() if config_path.exists() else None) == config


def test_the_file_holds_no_key_in_the_clear(place: Path) -> None:
    """Neither seed, nor the full signing key, nor a room key in state.db appears in the file
    raw, as hex or as base64 (while the same search finds them in the home's own files)."""
    home = make_home(place / "ana")
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    sealed = (place / "ana.backup").read_bytes()
    in_home = home.identity.read_bytes() + home.database.read_bytes()
    for secret in (SEED, BOX, ROOM_KEY):
        assert any(form in in_home for form in forms(secret)), "the search can find it"
    full_signing_key = bytes(nacl.signing.SigningKey(SEED)._signing_key)
    for secret in (SEED, BOX, full_signing_key, ROOM_KEY):
        for form in forms(secret):
            assert form not in sealed


def test_a_home_without_identity_has_nothing_to_back_up(place: Path) -> None:
    """No identity: not_set_up, and no file is written."""
    home = Home(place / "empty")
    home.ensure()
    with pytest.raises(NotSetUp):
        take_backup(home, place / "b", PASS, limits=FAST)
    assert not (place / "b").exists()
    assert list(place.iterdir()) == [home.root] and list(home.root.iterdir()) == []


def test_a_wrong_passphrase_writes_nothing(place: Path) -> None:
    """Wrong passphrase: bad_passphrase, and the disk beside the target is as it was."""
    home = make_home(place / "ana")
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    before = listing(place)
    with pytest.raises(BadPassphrase):
        restore_backup(place / "ana.backup", Home(place / "new" / "home"), PASS + "!")
    assert listing(place) == before


def cut_and_changed(data: bytes) -> Iterator[tuple[str, bytes]]:
    """Damaged versions of ``data``: cut at many points, a byte flipped in each region, more
    bytes appended."""
    for length in sorted({0, 7, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 2,
                          len(data) // 3, len(data) // 2, len(data) - 40, len(data) - 1}):
        yield f"cut at {length}", data[:length]
    for offset in (0, 9, 12, 30, 50, 70, 90, HEADER_SIZE + 1, HEADER_SIZE + 20,
                   len(data) // 2, len(data) - 30, len(data) - 2):  # fmt: skip
        flipped = bytearray(data)
        flipped[offset] ^= 0x04
        yield f"byte {offset} flipped", bytes(flipped)
    yield "appended", data + b"\x00"


def test_a_damaged_file_is_damaged_backup_and_writes_nothing(place: Path) -> None:
    """Truncated, a byte changed in header, salt, verifier, ciphertext or tag, or with bytes
    appended: damaged_backup, and no file or directory appears or changes."""
    home = make_home(place / "ana", rows=[os.urandom(3000) for _ in range(30)])
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    good = (place / "ana.backup").read_bytes()
    for what, data in cut_and_changed(good):
        (place / "damaged.backup").write_bytes(data)
        before = listing(place)
        with pytest.raises(DamagedBackup):
            restore_backup(place / "damaged.backup", Home(place / "parent" / "home"), PASS)
        assert listing(place) == before, what


def test_an_identity_in_the_home_is_never_overwritten(place: Path) -> None:
    """A home with an identity (even another one) refuses: already_set_up, byte for byte."""
    home = make_home(place / "ana")
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    other = make_home(place / "other", seeds=(bytes(32), bytes(range(32, 64))))
    before = listing(place)
    with pytest.raises(CrosstalkError) as caught:
        restore_backup(place / "ana.backup", other, PASS)
    assert caught.value.code == "already_set_up"
    assert listing(place) == before


def test_a_running_daemon_on_the_target_refuses(place: Path) -> None:
    """A home without identity but with its lock held (a daemon): home_in_use, untouched."""
    home = make_home(place / "ana")
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    target = Home(place / "busy")
    target.ensure()
    held = try_acquire(target.lock)
    assert isinstance(held, DaemonLock)
    try:
        before = listing(place)
        with pytest.raises(HomeInUse):
            restore_backup(place / "ana.backup", target, PASS)
        assert listing(place) == before
    finally:
        held.release()


def test_a_home_without_identity_is_replaced(place: Path) -> None:
    """A home that ran a daemon before pairing (a state.db, a log) becomes the restored one,
    and nothing of either is left beside it."""
    home = make_home(place / "ana", rows=[b"mine"])
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    target = Home(place / "fresh")
    target.ensure()
    connect(target.database).close()
    target.log.write_text("a log line\n")
    restore_backup(place / "ana.backup", target, PASS)
    assert dump(target.database) == dump(home.database)
    assert not target.log.exists()
    assert sorted(p.name for p in place.iterdir()) == ["ana", "ana.backup", "fresh"]


def test_an_empty_directory_takes_the_restore(place: Path) -> None:
    """An existing, empty home directory is fine to restore into."""
    home = make_home(place / "ana")
    take_backup(home, place / "ana.backup", PASS, limits=FAST)
    (place / "empty").mkdir()
    assert restore_backup(place / "ana.backup", Home(place / "empty"), PASS).label == "ana"


WARM_UP = 50


def writer(
    path: Path, stop: threading.Event, warm: threading.Event, committed: list[int]
) -> None:
    """Commit pairs of rows (one in each of two tables) until stopped; count the commits, and
    set ``warm`` after the first ``WARM_UP``."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA synchronous = OFF")
    try:
        while not stop.is_set():
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO left_side (value) VALUES (randomblob(200))")
            conn.execute("INSERT INTO right_side (value) VALUES (randomblob(200))")
            conn.execute("COMMIT")
            committed[0] += 1
            if committed[0] == WARM_UP:
                warm.set()
    finally:
        conn.close()


def test_a_backup_while_writes_go_on_is_one_commit(place: Path) -> None:
    """With another connection committing all the while (as a running daemon does), the copy
    holds whole transactions only: both tables have the same number of rows."""
    home = make_home(place / "ana", rows=[os.urandom(4000) for _ in range(3000)])
    conn = sqlite3.connect(home.database, isolation_level=None)
    conn.execute("CREATE TABLE left_side (n INTEGER PRIMARY KEY, value BLOB)")
    conn.execute("CREATE TABLE right_side (n INTEGER PRIMARY KEY, value BLOB)")
    conn.close()
    stop, warm, committed = threading.Event(), threading.Event(), [0]
    thread = threading.Thread(target=writer, args=(home.database, stop, warm, committed))
    thread.start()
    try:
        assert warm.wait(timeout=30), "the writer did not get going"
        take_backup(home, place / "ana.backup", PASS, limits=FAST)
        at_end = committed[0]
    finally:
        stop.set()
        thread.join(timeout=30)
    target = Home(place / "restored")
    restore_backup(place / "ana.backup", target, PASS)
    copy = sqlite3.connect(target.database)
    try:
        left = copy.execute("SELECT count(*) FROM left_side").fetchone()[0]
        right = copy.execute("SELECT count(*) FROM right_side").fetchone()[0]
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        copy.close()
    # Whole transactions only; some from before the copy, and the writer went on after it.
    assert WARM_UP <= left == right < at_end


def test_an_open_transaction_is_not_in_the_copy_and_does_not_block_it(place: Path) -> None:
    """A write transaction still open while the backup runs is left out, and the backup does
    not wait for it."""
    home = make_home(place / "ana")
    open_writer = sqlite3.connect(home.database, isolation_level=None)
    open_writer.execute("BEGIN IMMEDIATE")
    open_writer.execute("INSERT INTO kept (value) VALUES (x'0badc0de')")
    try:
        take_backup(home, place / "ana.backup", PASS, limits=FAST)
    finally:
        open_writer.execute("COMMIT")
        open_writer.close()
    target = Home(place / "restored")
    restore_backup(place / "ana.backup", target, PASS)
    assert "X'0BADC0DE'" not in " ".join(dump(target.database))
    assert "X'0BADC0DE'" in " ".join(dump(home.database))


def test_memory_stays_bounded_for_a_big_state(place: Path) -> None:
    """Backing up and restoring a 48 MB state.db allocates at most a few MiB in Python at a
    time: the contents stream through one message at a time."""
    home = make_home(place / "ana", rows=[os.urandom(1 << 20) for _ in range(48)])
    size = home.database.stat().st_size
    assert size > 48 << 20
    tracemalloc.start()
    try:
        take_backup(home, place / "ana.backup", PASS, limits=FAST)
        _, backup_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        restore_backup(place / "ana.backup", Home(place / "restored"), PASS)
        _, restore_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert backup_peak < 6 << 20 and restore_peak < 6 << 20, (backup_peak, restore_peak)
