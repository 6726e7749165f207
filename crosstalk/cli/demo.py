"""``crosstalk demo``: the whole flow on a throwaway relay and two throwaway identities.

Everything happens in a temporary directory: a relay on a free loopback port, two homes (ana and
ben) with their own daemons, a pairing with real words and real fingerprints, a message with a
slice, a fact, a task and its claim. Then every process is stopped by its pid and the directory
is removed, whatever happened on the way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crosstalk.client import call, start_daemon
from crosstalk.errors import CrosstalkError, NoAnswer, RelayUnreachable
from crosstalk.hook.control import ControlConnection
from crosstalk.paths import RELAY_ENV, Home

STEP_TIMEOUT = 30.0


@contextmanager
def _relay(root: Path) -> Iterator[str]:
    """A relay process on a free loopback port, stopped by pid on the way out."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crosstalk",
            "relay",
            "serve",
            "--port",
            "0",
            "--data",
            str(root / "relay"),
            "--json",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RelayUnreachable("The demo relay did not start.")
        yield str(json.loads(line)["listening"])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _stop(home: Home) -> None:
    try:
        pid = int(home.lock.read_text().strip() or 0)
    except (OSError, ValueError):
        return
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _gone(pid):
                return
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        _gone(pid)


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited, reaping it if it is our child (start_daemon's Popen).

    A child that exited stays a zombie until reaped, and a zombie still answers kill(pid, 0).
    """
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        return reaped == pid
    except ChildProcessError:  # not our child: someone else reaps it
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _pair(
    say: Callable[[str], None], ana: Home, ben: Home
) -> tuple[dict[str, Any], dict[str, Any]]:
    with ControlConnection(ana.socket, timeout=STEP_TIMEOUT) as conn:
        conn.send("room_new", {"label": "ana"})
        invite = conn.receive()["invite"]
        say(f"ana$ crosstalk room new\n      {invite}      ← ana reads these words to ben\n")
        say(f"ben$ crosstalk room join {invite}")
        joined = call(ben, "room_join", {"code": invite, "label": "ben"}, timeout=STEP_TIMEOUT)
        result = conn.receive()
    return result, joined


def run_demo(say: Callable[[str], None]) -> dict[str, Any]:
    """Run the flow, narrating through ``say``; returns a summary (for --json)."""
    root = Path(tempfile.mkdtemp(prefix="ct-demo-", dir="/tmp"))
    ana, ben = Home(root / "ana"), Home(root / "ben")
    started = time.monotonic()
    saved_relay = os.environ.get(RELAY_ENV)
    try:
        with _relay(root) as url:
            os.environ[RELAY_ENV] = url  # both daemons inherit it
            say(f"A throwaway relay is listening on {url}; it only ever sees ciphertext.\n")
            try:
                return _flow(say, ana, ben)
            finally:
                # Before the relay goes: a relay stopping under live links waits for each close.
                for home in (ana, ben):
                    _stop(home)
    finally:
        if saved_relay is None:
            os.environ.pop(RELAY_ENV, None)
        else:
            os.environ[RELAY_ENV] = saved_relay
        shutil.rmtree(root, ignore_errors=True)
        say(
            f"\nCleaned up ({time.monotonic() - started:.1f} s): both daemons and the relay "
            "stopped, their files removed."
        )


def _flow(say: Callable[[str], None], ana: Home, ben: Home) -> dict[str, Any]:
    with ThreadPoolExecutor(max_workers=2) as pool:  # two cold starts at once
        list(pool.map(start_daemon, (ana, ben)))
    inviter, joiner = _pair(say, ana, ben)
    say(f"\n  ana sees   them {inviter['them']}   you {inviter['you']}")
    say(f"  ben sees   them {joiner['them']}   you {joiner['you']}")
    say("  Each side's 'them' is the other's 'you': nobody is in the middle.\n")
    messages = _send_and_read(say, ana, ben)
    claim = _share_memory(say, ana, ben)
    facts, tasks = _look_around(say, ana, ben)
    return {
        "paired": inviter["them"] == joiner["you"],
        "messages": len(messages),
        "facts": len(facts),
        "tasks": len(tasks),
        "claim": claim["outcome"],
    }


def _send_and_read(say: Callable[[str], None], ana: Home, ben: Home) -> list[dict[str, Any]]:
    """ana sends ben a blocking message with a slice; ben reads it (the slice only named)."""
    say(
        'ana$ crosstalk send ben "renamed fetch_devices to list_devices" '
        '--intent blocking --slice note:"two call sites in api/"'
    )
    call(
        ana,
        "send",
        {
            "to": "ben",
            "text": "renamed fetch_devices to list_devices",
            "intent": "blocking",
            "slices": ["note:two call sites in api/"],
        },
    )
    messages = _wait_for_messages(ben)
    first = messages[0]
    say(
        f"ben$ crosstalk read\n      {first['from']} · {first['intent']}: {first['text']}"
        f"\n      [slice 0] {first['slices'][0]['kind']}: "
        f"{first['slices'][0]['bytes']} bytes, fetched only if asked\n"
    )
    return messages


def _share_memory(say: Callable[[str], None], ana: Home, ben: Home) -> dict[str, Any]:
    """ana records a fact and a task; ben claims the task. Returns ben's claim."""
    say('ana$ crosstalk facts add "the API returns snake_case"')
    call(ana, "fact_add", {"text": "the API returns snake_case"})
    say('ana$ crosstalk tasks add "regenerate the device fixtures"')
    task = call(ana, "task_add", {"text": "regenerate the device fixtures"})
    claim = _claim(ben, str(task["id"]))
    say(
        f"ben$ crosstalk tasks claim {task['id']}\n      {claim['outcome']}: "
        f"claimed by {claim['claimed_by']}\n"
    )
    return claim


def _look_around(
    say: Callable[[str], None], ana: Home, ben: Home
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Peers, facts, tasks and the daemon's health as each side sees them; (facts, tasks)."""
    peers = call(ana, "peers")["peers"]
    say("ana$ crosstalk peers")
    for p in peers:
        say(f"      {p['label']:<8} {'online' if p['online'] else 'offline':<8} level {p['level']}")
    facts = call(ben, "facts")["facts"]
    say("ben$ crosstalk facts")
    for fact in facts:
        say(f"      {fact['text']}  (by {', '.join(fact['by'])})")
    tasks = call(ben, "tasks")["tasks"]
    say("ben$ crosstalk tasks")
    for t in tasks:
        say(f"      {t['text']}  [{t['state']}, {t['claimed_by'] or 'unclaimed'}]")
    health = call(ana, "health")["actors"]
    say(
        f"ana$ crosstalk doctor\n      {len(health)} actors running, "
        f"{sum(a['restarts'] for a in health)} restarts"
    )
    return facts, tasks


def _wait_for_messages(home: Home) -> list[dict[str, Any]]:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        reply = call(home, "read", {})
        if reply["messages"]:
            call(home, "ack", {"lease": reply["lease"]})  # shown: now they are read
            return list(reply["messages"])
        time.sleep(0.05)
    raise NoAnswer("The demo message did not arrive in time.")


def _claim(home: Home, task_id: str) -> dict[str, Any]:
    """Claim once the task has reached this replica (it travels through the relay)."""
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        try:
            return call(home, "task_claim", {"id": task_id}, timeout=STEP_TIMEOUT)
        except CrosstalkError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
