"""Small private files: written atomically, read without ever being changed.

Two rules from DESIGN.md §4 live here. Files in the state directory are 0600. A file that does not
parse is reported, naming it, and left exactly as it was: the reader only ever opens it for reading,
and the writer replaces a file by renaming a complete new one over it, so a crash at any instant
leaves either the old bytes or the new bytes, never a mixture.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from crosstalk.errors import DamagedState

PRIVATE_FILE_MODE = 0o600


def _fsync(fd: int) -> None:
    """Flush ``fd`` to stable storage.

    On macOS ``fsync`` only reaches the drive's cache; ``F_FULLFSYNC`` asks the drive to write it
    out (the same reason SQLite has ``PRAGMA fullfsync``).
    """
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
        return
    os.fsync(fd)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (POSIX needs the directory synced)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def write_private_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``, mode 0600, so that a crash leaves old or new, never half.

    Writes a temporary file in the same directory (``mkstemp`` creates it 0600, so the bytes are
    never readable by others even for an instant), fsyncs it, renames it over ``path`` and fsyncs
    the directory so the rename itself survives a power loss.

    Args:
        path: the file to write; its directory must exist.
        data: the complete new contents.
    """
    directory = path.parent
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            # mkstemp already uses 0600; the chmod states the rule where it matters.
            os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
            _fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    fsync_directory(directory)


def damaged(path: Path, problem: str) -> DamagedState:
    """The one sentence we say about a state file we will not touch."""
    return DamagedState(
        f"{path.name} at {path} {problem}; it was left untouched. "
        "Move it aside (or restore a backup) and try again."
    )


def read_json_file(path: Path) -> object | None:
    """Parse the JSON file at ``path``; ``None`` when there is no such file.

    The file is only opened for reading, so whatever is wrong with it, it stays byte-identical.

    Raises:
        DamagedState: naming the file, when it cannot be read or is not JSON.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise damaged(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        parsed: object = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise damaged(path, f"does not parse: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise damaged(path, f"does not parse: {exc}") from None
    return parsed
