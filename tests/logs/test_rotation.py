"""daemon.log's size limit: parsed from CROSSTALK_LOG_MAX_BYTES, rotated, files kept private."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from crosstalk.logs import (
    BACKUPS,
    DEFAULT_MAX_BYTES,
    JsonLineFormatter,
    PrivateRotatingFileHandler,
    max_bytes_from,
)


@pytest.mark.parametrize(
    ("raw", "size"),
    [("4096", 4096), ("512K", 512 << 10), ("10M", 10 << 20), ("1GiB", 1 << 30), (" 2mb ", 2 << 20),
     (None, DEFAULT_MAX_BYTES), ("", DEFAULT_MAX_BYTES)],
)
def test_a_size_is_bytes_or_a_binary_unit(raw: str | None, size: int) -> None:
    """Whole bytes, or K/M/G (KiB, MiB, GiB); unset is the default, with nothing to say."""
    assert max_bytes_from(raw) == (size, None)


@pytest.mark.parametrize("raw", ["lots", "0", "-5", "1.5M", "10T", "M"])
def test_a_bad_size_falls_back_to_the_default_and_says_why(raw: str) -> None:
    """Not a positive size: the default, and a sentence naming the variable and the value."""
    size, problem = max_bytes_from(raw)
    assert size == DEFAULT_MAX_BYTES
    assert problem is not None and f"CROSSTALK_LOG_MAX_BYTES={raw!r}" in problem


def test_the_handler_rotates_keeps_three_and_creates_files_private(tmp_path: Path) -> None:
    """Past max_bytes the log moves to .1 (… .3, the oldest dropped); each file is 0600."""
    path = tmp_path / "daemon.log"
    handler = PrivateRotatingFileHandler(path, maxBytes=300, backupCount=BACKUPS,
                                         encoding="utf-8")
    handler.setFormatter(JsonLineFormatter())
    logger = logging.Logger("rotation-test")  # not registered: no global logger is touched
    logger.addHandler(handler)
    try:
        for i in range(100):
            logger.warning("line %03d", i)
    finally:
        handler.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["daemon.log", "daemon.log.1", "daemon.log.2", "daemon.log.3"]
    assert all((tmp_path / n).stat().st_mode & 0o777 == 0o600 for n in names)
    assert all((tmp_path / n).stat().st_size <= 300 for n in names)
    assert "line 099" in path.read_text()  # the newest lines are in the live file
    assert "line 000" not in "".join((tmp_path / n).read_text() for n in names)
