"""`relay serve --log-file`: the relay's log goes to the file, rotated at CROSSTALK_LOG_MAX_BYTES
with three old files kept, like daemon.log (issue 38 item 4)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.relay.process import RelayProcess

LIMIT = 200  # bytes: one start and stop of the relay writes more than this


def test_the_relay_log_file_rotates_and_keeps_three_old_files(tmp_path: Path) -> None:
    """Six starts and stops at a 200-byte limit: relay.log and .1 to .3, each bounded, 0600."""
    log = tmp_path / "relay.log"
    relay = RelayProcess(tmp_path / "data", tmp_path / "relay.stderr", "--log-file", str(log))
    saved = os.environ.get("CROSSTALK_LOG_MAX_BYTES")
    os.environ["CROSSTALK_LOG_MAX_BYTES"] = str(LIMIT)  # inherited by the relay process
    try:
        for _ in range(6):
            relay.start()
            assert relay.kill(signal.SIGTERM) == 0
    finally:
        if saved is None:
            del os.environ["CROSSTALK_LOG_MAX_BYTES"]
        else:
            os.environ["CROSSTALK_LOG_MAX_BYTES"] = saved
    files = sorted(p.name for p in tmp_path.glob("relay.log*"))
    assert files == ["relay.log", "relay.log.1", "relay.log.2", "relay.log.3"]
    lines = "".join(p.read_text() for p in tmp_path.glob("relay.log*"))
    assert "relay listening on 127.0.0.1:" in lines
    for path in tmp_path.glob("relay.log*"):
        assert path.stat().st_mode & 0o777 == 0o600, path.name
        assert path.stat().st_size <= LIMIT or path.read_text().count("\n") == 1, path.name
    assert "relay listening" not in (tmp_path / "relay.stderr").read_text()  # not on stderr
