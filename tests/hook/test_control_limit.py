"""The hook's control client refuses what the daemon would refuse, before writing a byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.errors import TooLarge
from crosstalk.hook import control
from crosstalk.wire.control import MAX_REQUEST_BYTES


def test_the_client_and_the_daemon_share_one_request_limit() -> None:
    """``hook.control.MAX_REQUEST`` (stdlib-only copy) equals the daemon's own limit."""
    assert control.MAX_REQUEST == MAX_REQUEST_BYTES


def test_an_oversized_request_is_too_large_before_it_is_written(tmp_path: Path) -> None:
    """A 10 MB send is ``too_large`` at the client, not a broken pipe mid-line."""
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(1)
        with control.ControlConnection(path, timeout=5) as conn:
            with pytest.raises(TooLarge):
                conn.send("send", {"to": "ben", "text": "x" * (10 * 1024 * 1024)})
            accepted, _ = server.accept()
            with accepted:
                accepted.setblocking(False)
                with pytest.raises(BlockingIOError):
                    accepted.recv(1)  # nothing at all was written
