"""Structured logging for the daemon: one JSON object per line in ``daemon.log``.

Level policy (STYLE rule 25): ERROR for bugs, WARNING for degraded service, INFO for actor and
relay lifecycle, DEBUG for frames and transitions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path


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


def configure_daemon_logging(path: Path, *, level: int = logging.INFO) -> logging.Handler:
    """Send every log record to ``path`` (created 0600) and return the handler."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.close(fd)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    return handler
