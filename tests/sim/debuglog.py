"""Daemon logs for one seed, when asked: ``SIM_LOG=path python -m tests.sim --seed N``.

The nodes share one process, so each record is tagged with the node whose task wrote it (the
determinism module's context variable) and the virtual time. Off by default: the
logs would cost more than the run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from tests.sim.determinism import NODE


class _Tag(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.node = NODE.get()
        try:
            record.vt = f"{trio.current_time():9.3f}"
        except RuntimeError:
            record.vt = "    -    "
        return True


@contextmanager
def daemon_logs() -> Iterator[None]:
    """Send every log record to ``$SIM_LOG`` while the run lasts, else silence them."""
    path = os.environ.get("SIM_LOG")
    if not path:
        logging.disable(logging.CRITICAL)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)
        return
    handler = logging.FileHandler(path, mode="w")
    handler.addFilter(_Tag())
    handler.setFormatter(logging.Formatter("%(vt)s %(node)-5s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
