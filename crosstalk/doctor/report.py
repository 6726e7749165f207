"""``crosstalk doctor``: check one home and say, in plain words, what is wrong and what fixes it.

Each check is a small function returning :class:`Check` rows; ``run_checks`` gathers them and
the daemon's actor health. Reading only: the doctor never changes anything it inspects.

Every failing row says what is wrong and then the exact command that fixes it, written for the
home being checked: a home other than the one the shell would pick anyway gets ``--home PATH``
in each command, so the command can be pasted as it is. Where no command of ours can fix it (a
file to move aside, a client's own trust step), the row names the shell command or the step.
The daemon's rows are built by :func:`daemon_rows` from what the daemon answered, so they are
tested with plain values.
"""

from __future__ import annotations

import shlex
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

import attrs

from crosstalk.client import call, daemon_pid
from crosstalk.doctor.checks import Check
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home
from crosstalk.store.checks import inspect_state_files
from crosstalk.store.migrations import LATEST_VERSION, schema_version

UPGRADE = "in your crosstalk clone, run `git pull`, then `python3 -m pip install -e .`"
# The daemon promises to answer `status` within a second: an event loop that stood still longer
# broke that promise.
LOOP_LAG_LIMIT = 1.0


@attrs.frozen
class Report:
    checks: list[Check]
    actors: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def crosstalk_command(home: Home, words: str) -> str:
    """``crosstalk WORDS`` for this home, as one pastes it (``--home`` only when it is needed)."""
    if home.root == Home.resolve(None).root:
        return f"crosstalk {words}"
    return f"crosstalk {words} --home {shlex.quote(str(home.root))}"


def _restart(home: Home) -> str:
    stop = crosstalk_command(home, "daemon stop")
    start = crosstalk_command(home, "daemon start")
    return f"run `{stop}`, then `{start}`"


def check_state_dir(home: Home) -> list[Check]:
    """The state directory exists and only its owner can read it; so can every file in it."""
    root = home.root
    if not root.is_dir():
        start = crosstalk_command(home, "daemon start")
        detail = f"{root} does not exist yet; run `{start}` to create it."
        return [Check("state_dir", False, detail)]
    mode = stat.S_IMODE(root.stat().st_mode)
    chmod = f"chmod 700 {shlex.quote(str(root))}"
    rows = [
        Check("state_dir", True, f"{root} is 700")
        if mode == 0o700
        else Check("state_dir", False, f"{root} is {mode:o}, so others can look in; run `{chmod}`.")
    ]
    loose = sorted(
        p
        for p in root.iterdir()
        if (p.is_file() or p.is_socket()) and stat.S_IMODE(p.stat().st_mode) & 0o077
    )
    if not loose:
        rows.append(Check("private_files", True, "every file is 0600"))
    else:
        names = ", ".join(p.name for p in loose)
        paths = " ".join(shlex.quote(str(p)) for p in loose)
        rows.append(
            Check("private_files", False, f"others can read {names}; run `chmod 600 {paths}`.")
        )
    return rows


def _newer_schema(path: Path) -> bool:
    """Whether ``path`` is a database a newer crosstalk wrote (read-only; False if unreadable)."""
    try:
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return schema_version(conn) > LATEST_VERSION
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _damage_fix(home: Home, path: Path) -> str:
    if path == home.database and _newer_schema(path):
        return f"Upgrade crosstalk: {UPGRADE}."
    quoted = shlex.quote(str(path))
    aside = shlex.quote(str(path) + ".damaged")
    lost = (
        "you will need to pair again"
        if path == home.identity
        else "rooms, contacts and messages stay in the moved file"
    )
    start = crosstalk_command(home, "daemon start")
    return f"To start afresh without it ({lost}), run `mv {quoted} {aside}`, then `{start}`."


def check_files_parse(home: Home) -> list[Check]:
    """Every state file parses; a damaged one is named, with how to get going again."""
    verdicts = inspect_state_files(home)
    bad = [v for v in verdicts if not v.ok]
    if not bad:
        return [Check("state_files", True, "every state file parses")]
    return [
        Check("state_files", False, f"{v.detail} {_damage_fix(home, v.path)}")
        for v in bad
    ]


def daemon_rows(
    home: Home,
    pid: int | None,
    status: dict[str, Any] | None,
    actors: list[dict[str, Any]],
    error: str | None = None,
) -> list[Check]:
    """The daemon's rows from what it answered (``error``: why it did not answer)."""
    if pid is None:
        start = crosstalk_command(home, "daemon start")
        return [Check("daemon", False, f"not running; run `{start}`.")]
    if error is not None or status is None:
        why = f" ({error.rstrip('.')})" if error else ""
        detail = f"pid {pid} holds the lock but does not answer{why}; {_restart(home)}."
        return [Check("daemon", False, detail)]
    if status.get("pid") != pid:
        detail = f"the lock says pid {pid} but pid {status.get('pid')} answers the socket"
        return [Check("daemon", False, f"{detail}; {_restart(home)}.")]
    return [Check("daemon", True, f"one daemon, pid {pid}"), _actors_row(home, actors)]


def _actors_row(home: Home, actors: list[dict[str, Any]]) -> Check:
    bad = [a for a in actors if a.get("state") != "running"]
    if not bad:
        return Check("actors", True, f"{len(actors)} running")
    named = ", ".join(
        f"{a['name']} ({a.get('state')}"
        + (f": {a['last_error']}" if a.get("last_error") else "")
        + ")"
        for a in bad
    )
    return Check(
        "actors",
        False,
        f"not running: {named}; the details are in {home.log}; {_restart(home)}.",
    )


def _link_history(relay: dict[str, Any]) -> str:
    """``; lost 3 times, last 42 s ago (reason), back after 1.2 s`` or empty."""
    losses = int(relay.get("losses") or 0)
    if not losses:
        return ""
    text = f"; lost {losses} time{'s' if losses != 1 else ''}"
    if relay.get("lost_ago_s") is not None:
        text += f", last {float(relay['lost_ago_s']):.0f} s ago"
    if relay.get("last_loss"):
        text += f" ({str(relay['last_loss']).rstrip('.')})"
    if relay.get("reconnect_s") is not None:
        text += f", back after {float(relay['reconnect_s']):.1f} s"
    return text


def relay_row(status: dict[str, Any]) -> Check:
    """The relay link: passes only while it is up (or not needed yet); down or reconnecting
    fails, with the link's losses, the last reason and what to check."""
    relay = status.get("relay") or {}
    url, error = relay.get("url"), relay.get("last_error")
    if url is None:
        return Check("relay", True, "not started yet (it starts once you pair)")
    history = _link_history(relay)
    if relay.get("connected"):
        return Check("relay", True, f"connected to {url}{history}")
    probe = f"crosstalk relay status --relay {shlex.quote(str(url))}"
    attempts = int(relay.get("attempts") or 0)
    state = str(relay.get("state") or "connecting")
    why = str(error or relay.get("last_loss") or "").rstrip(".")
    doing = f"{state}, attempt {attempts}" if attempts else state
    return Check(
        "relay",
        False,
        f"not connected to {url} ({doing}{': ' + why if why else ''}){history}; messages "
        f"wait until it is back. Check it with `{probe}`; start that relay, or set "
        "CROSSTALK_RELAY to the right one.",
    )


def loop_row(home: Home, status: dict[str, Any]) -> Check:
    """The daemon's event loop: passes while it has never stood still for ``LOOP_LAG_LIMIT``
    (a request that held it, or the process stopped); fails naming how long and when."""
    loop = status.get("loop") or {}
    worst, at = float(loop.get("worst_lag_s") or 0.0), loop.get("worst_lag_at")
    if at is None:
        return Check("event_loop", True, "never late")
    when = time.strftime("at %Y-%m-%d %H:%M:%S", time.localtime(float(at)))
    if worst < LOOP_LAG_LIMIT:
        return Check("event_loop", True, f"worst lag {worst * 1000:.0f} ms, {when}")
    return Check(
        "event_loop",
        False,
        f"the daemon ran nothing else for {worst:.1f} s, {when} (something held its event "
        "loop, or the process was stopped): meanwhile it answered no one and its relay link "
        f"may have dropped. If nothing stopped it, report it with {home.log}.",
    )


def check_daemon(home: Home) -> tuple[list[Check], list[dict[str, Any]]]:
    """Exactly one daemon holds the home and answers; its actors are healthy; the relay is up."""
    pid = daemon_pid(home)
    if pid is None:
        return daemon_rows(home, None, None, []), []
    try:
        # health first: a daemon still starting answers it only once up, so status is then
        # the daemon's own, not its start-up gate's.
        health = call(home, "health", timeout=5.0)
        status = call(home, "status", timeout=5.0)
    except CrosstalkError as exc:
        return daemon_rows(home, pid, None, [], exc.message), []
    actors = list(health.get("actors", []))
    rows = daemon_rows(home, pid, status, actors)
    if all(row.ok for row in rows):
        rows += [relay_row(status), loop_row(home, status)]
    return rows, actors


def run_checks(home: Home) -> Report:
    """Run every check, in order."""
    checks = check_state_dir(home) + check_files_parse(home)
    daemon_checks, actors = check_daemon(home)
    from crosstalk.doctor.clients import client_rows  # only when the clients are checked

    return Report(checks=checks + daemon_checks + client_rows(), actors=actors)
