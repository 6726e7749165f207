"""Structured logging for the daemon: one JSON object per line in ``daemon.log``, rotated by size.

Level policy (STYLE rule 25): ERROR for bugs, WARNING for degraded service, INFO for actor and
relay lifecycle, DEBUG for frames and transitions. A condition that lasts (a room we were removed
from, a relay that is down) is logged when it begins or changes, then summarised now and then:
:mod:`crosstalk.logs.repeats`.

Rotation: once ``daemon.log`` would pass ``CROSSTALK_LOG_MAX_BYTES`` (default 10 MiB) it becomes
``daemon.log.1`` (``.1`` becomes ``.2`` … up to :data:`BACKUPS`, the oldest dropped), so the
log never takes more than about ``(BACKUPS + 1) * max_bytes``. Every file is created 0600. A
value that is not a positive size is not fatal: the default is used and the log says so first.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import re
import time
from collections.abc import Mapping
from io import TextIOWrapper
from pathlib import Path

from crosstalk.logs.repeats import SUMMARY_EVERY, Repeats, Say

__all__ = [
    "BACKUPS", "DEFAULT_MAX_BYTES", "LOG_MAX_BYTES_ENV", "LOG_SUMMARY_ENV", "JsonLineFormatter",
    "PrivateRotatingFileHandler", "Repeats", "Say", "configure_daemon_logging", "max_bytes_from",
    "repeats_from_env",
]

LOG_MAX_BYTES_ENV = "CROSSTALK_LOG_MAX_BYTES"
LOG_SUMMARY_ENV = "CROSSTALK_LOG_SUMMARY_EVERY"
DEFAULT_MAX_BYTES = 10 << 20
BACKUPS = 3
"""Rotated files kept beside the live one: ``daemon.log.1`` (newest) to ``daemon.log.3``."""

_SIZE = re.compile(r"\s*(\d+)\s*([kmg]?)(?:i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class JsonLineFormatter(logging.Formatter):
    """Renders a record as one JSON line: ts, level, logger, msg (+ exc)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A size-rotated log whose files are created 0600 (the log names rooms and peers).

    ``RotatingFileHandler`` opens each new file with the process's umask; rotation renames, so
    the old files keep the mode they were created with.
    """

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


def max_bytes_from(raw: str | None) -> tuple[int, str | None]:
    """The size ``daemon.log`` may reach before it rotates, from ``CROSSTALK_LOG_MAX_BYTES``'s
    value (``None``: unset), and a sentence for the log if that value was not usable.

    Takes a whole number of bytes, optionally with a binary unit: ``10485760``, ``512K``,
    ``10M``, ``1GiB``. Anything else, or zero, falls back to :data:`DEFAULT_MAX_BYTES`.
    """
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES, None
    match = _SIZE.fullmatch(raw)
    size = int(match[1]) * _UNITS[match[2].lower()] if match else 0
    if size <= 0:
        return DEFAULT_MAX_BYTES, (
            f"{LOG_MAX_BYTES_ENV}={raw!r} is not a positive size (bytes, or with K, M or G); "
            f"rotating at the default {DEFAULT_MAX_BYTES} bytes"
        )
    return size, None


def repeats_from_env(environ: Mapping[str, str] = os.environ) -> Repeats:
    """A :class:`Repeats` summarising every ``CROSSTALK_LOG_SUMMARY_EVERY`` seconds (default an
    hour; a value that is not a positive number is the default)."""
    raw = environ.get(LOG_SUMMARY_ENV, "")
    try:
        every = float(raw) if raw.strip() else SUMMARY_EVERY
    except ValueError:
        every = SUMMARY_EVERY
    return Repeats(every=every if 0 < every < float("inf") else SUMMARY_EVERY)


def configure_daemon_logging(
    path: Path, *, level: int = logging.INFO, max_bytes: str | None = None
) -> logging.Handler:
    """Send every log record to ``path`` (created 0600, rotated by size) and return the handler.

    ``max_bytes`` is ``CROSSTALK_LOG_MAX_BYTES``'s value (read from the environment when None).
    """
    raw = os.environ.get(LOG_MAX_BYTES_ENV) if max_bytes is None else max_bytes
    size, problem = max_bytes_from(raw)
    handler = PrivateRotatingFileHandler(
        path, maxBytes=size, backupCount=BACKUPS, encoding="utf-8"
    )
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    if problem is not None:
        logging.getLogger(__name__).warning("%s", problem)
    return handler
