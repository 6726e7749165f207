"""Fixtures for relay tests: the real relay process, stopped by pid."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.relay.process import RelayProcess


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[RelayProcess]:
    proc = RelayProcess(tmp_path / "data", tmp_path / "relay.stderr")
    proc.start()
    try:
        yield proc
    finally:
        proc.kill(signal.SIGTERM)
