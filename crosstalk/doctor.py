"""``crosstalk doctor``: check one home and say, in plain words, what is wrong and what fixes it.

Each check is a small function returning :class:`Check` rows; ``run_checks`` gathers them and
the daemon's actor health. Reading only: the doctor never changes anything it inspects.
"""

from __future__ import annotations

import stat
from typing import Any

import attrs

from crosstalk.client import call, daemon_pid
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home
from crosstalk.store import check_state_files


@attrs.frozen
class Check:
    name: str
    ok: bool
    detail: str


@attrs.frozen
class Report:
    checks: list[Check]
    actors: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def check_state_dir(home: Home) -> list[Check]:
    """The state directory exists and only its owner can read it; so can every file in it."""
    if not home.root.is_dir():
        return [
            Check("state_dir", False, f"{home.root} does not exist; run `crosstalk daemon start`.")
        ]
    rows = []
    mode = stat.S_IMODE(home.root.stat().st_mode)
    rows.append(
        Check(
            "state_dir",
            mode == 0o700,
            f"{home.root} is {mode:o}"
            + ("" if mode == 0o700 else f"; run `chmod 700 {home.root}`."),
        )
    )
    loose = sorted(
        p.name
        for p in home.root.iterdir()
        if (p.is_file() or p.is_socket()) and stat.S_IMODE(p.stat().st_mode) & 0o077
    )
    rows.append(
        Check(
            "private_files",
            not loose,
            "every file is 0600"
            if not loose
            else f"readable by others: {', '.join(loose)}; run `chmod 600` on them.",
        )
    )
    return rows


def check_files_parse(home: Home) -> list[Check]:
    """Every state file parses."""
    try:
        check_state_files(home)
    except CrosstalkError as exc:
        return [Check("state_files", False, exc.message)]
    return [Check("state_files", True, "every state file parses")]


def check_daemon(home: Home) -> tuple[list[Check], list[dict[str, Any]]]:
    """Exactly one daemon holds the home and answers; its actors are all healthy."""
    pid = daemon_pid(home)
    if pid is None:
        return [Check("daemon", False, "not running; run `crosstalk daemon start`.")], []
    try:
        status = call(home, "status", timeout=5.0)
        health = call(home, "health", timeout=5.0)
    except CrosstalkError as exc:
        return [Check("daemon", False, f"pid {pid} holds the lock but {exc.message}")], []
    if status.get("pid") != pid:
        detail = f"the lock says pid {pid} but pid {status.get('pid')} answers the socket"
        return [
            Check("daemon", False, detail + "; run `crosstalk daemon stop` and start again.")
        ], []
    actors = list(health.get("actors", []))
    bad = [a["name"] for a in actors if a.get("state") != "running"]
    return [
        Check("daemon", True, f"one daemon, pid {pid}"),
        Check(
            "actors",
            not bad,
            f"{len(actors)} running"
            if not bad
            else f"not running: {', '.join(bad)}; see daemon.log, then restart the daemon "
            "(`crosstalk daemon stop`, `crosstalk daemon start`).",
        ),
    ], actors


def run_checks(home: Home) -> Report:
    """Run every check, in order."""
    checks = check_state_dir(home) + check_files_parse(home)
    daemon_checks, actors = check_daemon(home)
    # Imported here: doctor_clients builds its rows from this module's Check.
    from crosstalk.doctor_clients import client_rows

    return Report(checks=checks + daemon_checks + client_rows(), actors=actors)
