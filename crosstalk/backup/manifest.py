"""What a backup holds: the manifest, its first sealed message.

The manifest names the identity (label, machine, both secret seeds: it travels only inside the
sealed stream), where its keys lived (``keys_in``: the OS keyring or ``identity.json``), and the
files that follow it in the stream, in order, with their sizes. Only the files in
:data:`FILES` may be named, so a backup can never write anywhere else in a home.

What a home holds and why each is in or out (docs/architecture.md, Durable state):

- ``identity.json``: in, as the manifest's identity (with the seeds, wherever they were kept).
- ``state.db``: in, as a consistent snapshot (SQLite's online backup): settings (relay address,
  pinned relay keys), contacts, rooms, room keys by epoch, relay cursors, outbox, held messages,
  room memory, trust.
- ``config.json``: in when present (settings the user wrote by hand).
- ``daemon.sock``, ``daemon.lock``, ``daemon.log*``: out (this run's socket, lock and log).
- ``hook-sessions/``, ``hook-warnings/``, ``hook-started-daemon``: out (the hook's notes about
  agent sessions running on this machine now; sessions register again when they next run).
- Project bindings (``.crosstalk/project.json``) live in the repositories, not in the home.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from cattrs.errors import BaseValidationError

from crosstalk.errors import DamagedBackup
from crosstalk.store.identity import IdentityRecord
from crosstalk.wire.converter import converter

FORMAT = 1
STATE = "state.db"
FILES = (STATE, "config.json")
"""The files a backup may carry, by their name in the home."""
KEYS_IN_FILE = "file"


@attrs.frozen
class Entry:
    """One file in the stream after the manifest: its name in the home and its size."""

    name: str
    size: int


@attrs.frozen
class Manifest:
    """The first message of a backup: who, where the keys lived, and which files follow."""

    identity: IdentityRecord
    keys_in: str
    created_at: float
    files: tuple[Entry, ...]
    format: int = FORMAT


def manifest_bytes(manifest: Manifest) -> bytes:
    """The manifest as sorted JSON (bytes as base64, through the one converter)."""
    data: dict[str, Any] = converter.unstructure(manifest)
    return json.dumps(data, sort_keys=True).encode("utf-8")


def parse_manifest(raw: bytes) -> Manifest:
    """The manifest in ``raw``; DamagedBackup when it is not one this crosstalk can use."""
    try:
        manifest = converter.structure(json.loads(raw.decode("utf-8")), Manifest)
    except (BaseValidationError, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise DamagedBackup("The backup's contents list does not parse; it is damaged.") from None
    if manifest.format != FORMAT:
        raise DamagedBackup(
            f"This backup's contents are in format {manifest.format}, which this crosstalk "
            "cannot read; upgrade crosstalk and restore again."
        )
    names = [entry.name for entry in manifest.files]
    if len(set(names)) != len(names) or not set(names) <= set(FILES):
        raise DamagedBackup("The backup names files a crosstalk home does not hold.")
    if any(entry.size < 0 for entry in manifest.files):
        raise DamagedBackup("The backup's contents list gives a negative size.")
    return manifest
