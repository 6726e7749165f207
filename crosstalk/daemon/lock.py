"""One daemon per state directory, enforced by an exclusive lock on ``daemon.lock``.

The kernel drops a ``flock`` when its holder dies, even by ``kill -9``, so a stale lock can never
keep a new daemon out, and ten daemons started at once cannot both win. The holder writes its
pid into the file so others can say who holds it. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path


class DaemonLock:
    """The held lock. Keep it alive for as long as the daemon runs."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self.path = path

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1


def try_acquire(path: Path) -> DaemonLock | int:
    """Take the lock and write our pid, or return the pid of the daemon holding it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return holder_pid(path)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    os.fsync(fd)
    return DaemonLock(fd, path)


def holder_pid(path: Path, *, wait: float = 2.0) -> int:
    """The pid written in the lock file, or 0 when it stays unreadable for ``wait`` seconds.

    The holder writes its pid right after taking the lock, so a reader racing it waits a
    moment for that write instead of reporting pid 0.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            pid = int(path.read_text().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid or time.monotonic() >= deadline:
            return pid
        time.sleep(0.01)


def is_held(path: Path) -> bool:
    """Whether some process holds the lock right now (without taking it for long)."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
