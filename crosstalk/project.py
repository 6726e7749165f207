"""Projects: a repository's binding to a room (``.crosstalk/project.json``), and DECISIONS.md.

``.crosstalk/project.json`` at a repository's root names the room every session there works in::

    {"room": "<room id>"}

It holds the room id only, never a key: the file is meant to be committed, and a room id opens
nothing. ``--room`` on a command overrides it.

:func:`append_decision_file` appends to ``DECISIONS.md`` safely when several processes (several
daemons, several homes) decide at once: it takes an exclusive ``flock`` on the file, reads it,
appends the entry :func:`crosstalk.core.decisions.append_decision` produces, and fsyncs before the
lock is released, so entries land whole and in the order their writers got the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path

from crosstalk.core.decisions import append_decision
from crosstalk.errors import InvalidConfig

PROJECT_FILE = Path(".crosstalk") / "project.json"
DECISIONS_FILE = "DECISIONS.md"
_ROOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_PROJECT_FILE = 64 * 1024


def repo_root(cwd: str | os.PathLike[str]) -> Path | None:
    """The git repository root that contains ``cwd`` (a ``.git`` directory or file), or None.

    ``cwd`` comes from hooks and clients: a place too long for the OS to look at, or with a NUL
    in it, holds no repository (as ``crosstalk.hook.flow.project_of`` treats it)."""
    try:
        here = Path(cwd).absolute()
    except (OSError, ValueError):
        return None
    for candidate in (here, *here.parents):
        try:
            if (candidate / ".git").exists():
                return candidate
        except (OSError, ValueError):  # ENAMETOOLONG and friends, or an embedded NUL
            continue
    return None


def bound_room(root: Path) -> str | None:
    """The room id ``root/.crosstalk/project.json`` names, or None when there is no such file.

    Raises:
        InvalidConfig: the file exists but is not ``{"room": "<id>"}``.
    """
    path = root / PROJECT_FILE
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PROJECT_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InvalidConfig(f"{path} cannot be read ({exc.strerror}).") from None
    try:
        data = json.loads(raw) if len(raw) <= MAX_PROJECT_FILE else None
    except ValueError:
        data = None
    room = data.get("room") if isinstance(data, dict) else None
    if not isinstance(room, str) or not _ROOM_ID.fullmatch(room):
        raise InvalidConfig(f'{path} must be {{"room": "<room id>"}}; fix or delete it.')
    return room


def bind_room(root: Path, room_id: str) -> Path:
    """Write ``.crosstalk/project.json`` naming ``room_id`` (and nothing else)."""
    if not _ROOM_ID.fullmatch(room_id):
        raise InvalidConfig(f"{room_id!r} is not a room id.")
    path = root / PROJECT_FILE
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"room": room_id}) + "\n")
    return path


def append_decision_file(
    repo: Path, *, text: str, why: str, who: str, when_utc: str
) -> Path:
    """Append one decision to ``repo/DECISIONS.md`` (created with its heading when missing).

    Blocking (file lock, fsync): call it from a worker thread in async code.
    """
    path = repo / DECISIONS_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        existing = _read_all(fd)
        old = existing.decode("utf-8", errors="surrogateescape") if existing else None
        new = append_decision(old, text=text, why=why, who=who, when_utc=when_utc)
        encoded = new.encode("utf-8", errors="surrogateescape")
        if encoded.startswith(existing):
            _write_all(fd, encoded[len(existing) :], at=len(existing))
        else:  # only trailing whitespace differs: rewrite the file under the lock
            os.ftruncate(fd, 0)
            _write_all(fd, encoded, at=0)
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return path


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes, *, at: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        view, at = view[written:], at + written
