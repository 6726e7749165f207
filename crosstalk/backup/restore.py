"""``crosstalk restore FILE``: a sealed backup back into a home that has no identity.

Nothing is written into the home until the whole file has been read and authenticated. The
contents go into a new directory beside the home (``.<name>.restore-*`` in its parent, 0700),
``state.db`` streamed one message at a time; only after the FINAL message, with nothing after it,
and a ``quick_check`` of the database, are the keys placed and the directory renamed into place.
On any failure that directory is removed (and any parent directories this call created), so a
wrong passphrase or a damaged file leaves the disk as it was.

Where the keys go follows ``crosstalk secure``: if they were in the OS keyring when the backup
was taken and this machine has a keyring that takes them (stored, then read back), they go
there and ``identity.json`` names them; otherwise ``identity.json`` holds them, 0600.

The home must have no identity (``already_set_up`` otherwise) and no daemon running on it
(``home_in_use``). A home that exists without an identity (a daemon that ran before pairing
leaves a ``state.db`` and a log) is replaced as a whole: it is moved aside, the restored one
renamed into its place, and the old one removed.

After a restore the daemon starts from the restored relay cursors: what the relay still holds
after them arrives, room memory is as it was at the backup, and the relay sees the same key.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import attrs

from crosstalk.backup.manifest import STATE, Manifest, parse_manifest
from crosstalk.backup.sealed import SealedReader
from crosstalk.crypto import fingerprint
from crosstalk.daemon.lock import holder_pid, is_held
from crosstalk.errors import (
    AlreadySetUp,
    CrosstalkError,
    DamagedBackup,
    DamagedState,
    HomeInUse,
    NoKeyring,
)
from crosstalk.paths import Home
from crosstalk.store.db import check_database
from crosstalk.store.files import PRIVATE_FILE_MODE, fsync_directory, write_private_atomic
from crosstalk.store.identity import IdentityRecord, identity_bytes, load_identity
from crosstalk.store.keyring_store import KEYRING, store_seeds


@attrs.frozen
class Restored:
    """What ``restore`` answers: who the home is now, and where its keys are kept."""

    label: str
    fingerprint: str
    storage: str


def restore_backup(source: Path, home: Home, passphrase: str) -> Restored:
    """Restore the backup at ``source`` into ``home``.

    Raises:
        BadPassphrase: the passphrase does not open it.
        DamagedBackup: it is truncated, changed, not a backup, or from a newer crosstalk.
        CrosstalkError: ``already_set_up`` when ``home`` has an identity.
        HomeInUse: a daemon runs on ``home``.
    """
    refuse_live(home)
    try:
        inp = source.open("rb")
    except OSError as exc:
        raise DamagedBackup(f"Cannot read the backup {source}: {exc.strerror or exc}.") from None
    created = _make_parents(home.root.parent)
    staged: Path | None = None
    try:
        with inp:
            staged = Path(tempfile.mkdtemp(prefix=f".{home.root.name}.restore-",
                                           dir=home.root.parent))
            manifest = _unpack(inp, passphrase, staged)
        record = manifest.identity
        in_keyring = manifest.keys_in == KEYRING and _keyring_takes(record)
        write_private_atomic(staged / "identity.json", identity_bytes(record, keyring=in_keyring))
        fsync_directory(staged)
        refuse_live(home)  # again, just before the swap: a daemon may have started meanwhile
        _swap_into_place(staged, home.root)
    except BaseException:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
        for directory in reversed(created):
            _remove_if_empty(directory)
        raise
    return Restored(
        label=record.label,
        fingerprint=fingerprint(record.ed25519_public),
        storage=KEYRING if in_keyring else "file",
    )


def refuse_live(home: Home) -> None:
    """Raise unless ``home`` could take a restore: no identity, no daemon."""
    if os.path.lexists(home.identity):
        try:
            record = load_identity(home.identity)
        except CrosstalkError:
            record = None
        who = f" ({record.label}, {fingerprint(record.ed25519_public)})" if record else ""
        raise AlreadySetUp(
            f"{home.root} already holds an identity{who}; a backup is restored only into a "
            "home without one. Use a fresh --home, or move that home aside first."
        )
    if is_held(home.lock):
        raise HomeInUse(
            f"A daemon (pid {holder_pid(home.lock)}) is running on {home.root}; stop it "
            "(`crosstalk daemon stop`) and restore again. Nothing was written."
        )


def _unpack(inp: BinaryIO, passphrase: str, staged: Path) -> Manifest:
    """Open the stream, write each file it carries into ``staged``; the manifest."""
    reader = SealedReader(inp, passphrase)
    manifest = parse_manifest(reader.manifest)
    messages = reader.messages()
    for entry in manifest.files:
        _write_entry(staged / entry.name, entry.size, messages)
    if next(messages, None) is not None:
        raise DamagedBackup("The backup holds more than its contents list says; it is damaged.")
    if any(entry.name == STATE for entry in manifest.files):
        try:
            check_database(staged / STATE)
        except DamagedState as exc:
            raise DamagedBackup(f"The state inside the backup cannot be used: {exc}") from None
    return manifest


def _write_entry(path: Path, size: int, messages: Iterator[bytes]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "wb") as out:
        left = size
        while left > 0:
            piece = next(messages, None)
            if piece is None or len(piece) > left:
                raise DamagedBackup("The backup's contents do not match its list; it is damaged.")
            out.write(piece)
            left -= len(piece)
        out.flush()
        os.fsync(out.fileno())


def _keyring_takes(record: IdentityRecord) -> bool:
    """Store the seeds in the OS keyring (read back); False when there is none that works."""
    try:
        store_seeds(
            fingerprint(record.ed25519_public),
            {"signing_seed": record.signing_seed, "box_secret": record.box_secret},
        )
    except NoKeyring:
        return False
    return True


def _swap_into_place(staged: Path, root: Path) -> None:
    """Rename ``staged`` to ``root``; an existing ``root`` (without identity) is replaced."""
    if not os.path.lexists(root) or (root.is_dir() and not any(root.iterdir())):
        os.replace(staged, root)  # onto nothing, or onto an empty directory
    else:
        aside = Path(tempfile.mkdtemp(prefix=f".{root.name}.replaced-", dir=root.parent))
        os.replace(root, aside)
        try:
            os.replace(staged, root)
        except BaseException:
            os.replace(aside, root)
            raise
        shutil.rmtree(aside, ignore_errors=True)
    root.chmod(0o700)
    fsync_directory(root.parent)


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents (0700); the ones created, outermost first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for each in reversed(missing):
        each.mkdir(mode=0o700)
    return list(reversed(missing))


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not empty after all: someone wrote there; leave it
        directory.rmdir()
