"""`crosstalk watch`: one JSON line per arrival, across daemon restarts.

The daemon's ``watch`` stream starts with a line giving a cursor (where the stream starts), and
every arrival carries its own. We keep the newest cursor we printed. When the stream ends (the
daemon stopped or restarted) we connect again, within ``reconnect`` seconds, and ask for the
arrivals after that cursor: what was held while the daemon was away prints then, and nothing
prints twice. A daemon that does not come back within the bound ends ``watch`` with
``daemon_unreachable`` and a sentence on stderr, so a script watching it knows the stream is
over. We never start a daemon here after the first connection: a daemon someone stopped stays
stopped.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from crosstalk.cli.output import visible
from crosstalk.client import ensure_daemon
from crosstalk.errors import CrosstalkError, DaemonUnreachable
from crosstalk.hook.control import ControlConnection
from crosstalk.paths import Home

RECONNECT = 30.0  # how long a stopped daemon has to come back
RETRY_EVERY = 0.2  # seconds between attempts to connect again
PROGRESS_EVERY = 5.0  # a line on stderr this often while waiting
CONNECT_TIMEOUT = 10.0
STARTING = "daemon_starting"  # a daemon still starting answers only `status`: not back yet


class _Stream:
    """Where the output has got to: the newest cursor printed (None before the first line)."""

    def __init__(self, *, text: bool) -> None:
        self.text = text
        self.cursor: int | None = None

    def follow(self, home: Home) -> bool:
        """Stream arrivals until the daemon ends the stream; False when it could not start
        (nothing answers yet, or the daemon is still starting)."""
        params: dict[str, Any] = {"text": self.text}
        if self.cursor is not None:
            params["after"] = self.cursor
        try:
            conn = ControlConnection(home.socket, timeout=CONNECT_TIMEOUT)
        except DaemonUnreachable:
            return False
        with conn:
            try:
                conn.send("watch", params)
                first = conn.receive()  # {"event": "watching", "cursor"}: it is on
            except DaemonUnreachable:
                return False
            except CrosstalkError as exc:
                if exc.code == STARTING:
                    return False
                raise
            if self.cursor is None:
                self.cursor = int(first["cursor"])
            conn.extend_deadline(None)
            for line in conn.stream():  # ends when the daemon closes the connection
                self._print(line)
        return True

    def _print(self, line: dict[str, Any]) -> None:
        line.pop("ok", None)
        cursor = line.pop("cursor", None)
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        if isinstance(cursor, int) and (self.cursor is None or cursor > self.cursor):
            self.cursor = cursor


def _note(text: str) -> None:
    sys.stderr.write(f"crosstalk: {visible(text)}\n")
    sys.stderr.flush()


def _wait_and_follow(stream: _Stream, home: Home, reconnect: float, *, resumed: bool) -> None:
    """Connect (again) within ``reconnect`` seconds and stream until the daemon ends it.

    Raises:
        DaemonUnreachable: nothing took the stream within ``reconnect`` seconds.
    """
    start = time.monotonic()
    next_note = start + PROGRESS_EVERY
    while not stream.follow(home):
        now = time.monotonic()
        if now - start >= reconnect:
            if resumed:
                raise DaemonUnreachable(
                    f"The daemon stopped and did not come back within {reconnect:g} s; "
                    "watch ended. `crosstalk daemon start` starts it again."
                )
            raise DaemonUnreachable(f"The daemon did not take the watch within {reconnect:g} s.")
        if resumed and now >= next_note:
            _note(f"still waiting for the daemon ({reconnect - (now - start):.0f} s left).")
            next_note = now + PROGRESS_EVERY
        time.sleep(RETRY_EVERY)  # a poll between attempts: the daemon has no way to call us
    if resumed:
        _note("the daemon is back; watch carries on from where it was.")


def watch_arrivals(home: Home, *, text: bool, json_output: bool, reconnect: float) -> None:
    """Print one JSON line per arrival until the daemon goes away for longer than
    ``reconnect`` seconds.

    Raises:
        DaemonUnreachable: the daemon stopped and did not come back in time (also said on
            stderr when the error itself goes to stdout as JSON).
    """
    ensure_daemon(home)
    stream = _Stream(text=text)
    resumed = False
    try:
        while True:
            _wait_and_follow(stream, home, reconnect, resumed=resumed)
            resumed = True
            _note(f"the daemon stopped; waiting up to {reconnect:g} s for it to come back.")
    except DaemonUnreachable as exc:
        if json_output:  # the envelope goes to stdout; a person watching reads stderr
            _note(exc.message)
        raise
