"""Durable state: which file under ``CROSSTALK_HOME`` holds what, and how it is kept safe.

``state.db`` (:mod:`crosstalk.store.db`)
    One SQLite database in WAL mode, ``synchronous=FULL``, 0600: settings, contacts, rooms and
    their rosters, room keys by epoch, per-room cursors, applied ops, the outbox, held messages,
    sessions. Its schema is versioned by ``PRAGMA user_version`` (:mod:`.migrations`). Change it
    only through ``await store.write(fn)``, which returns after the commit is on disk: acknowledge
    nothing before that. Typed settings helpers are in :mod:`.settings`.

``identity.json`` (:mod:`crosstalk.store.identity`)
    The label, machine name and the two secret seeds, 0600, written atomically, kept apart from
    the database so that a damaged database never costs the keys.

Files that do not parse are never written: :func:`check_state_files` names the damaged file
(``DamagedState``) and the daemon refuses to start. Small files are written by
:func:`crosstalk.store.files.write_private_atomic` (temp file, fsync, rename, fsync directory).
"""

from __future__ import annotations

from crosstalk.store.checks import StateFileCheck, check_state_files, inspect_state_files

__all__ = ["StateFileCheck", "check_state_files", "inspect_state_files"]
