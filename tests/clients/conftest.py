"""Fixtures for driving real agent clients against the stand-in model (issue 10).

The clients live in npm prefixes under the folder named by ``CROSSTALK_CLIENTS``
(``tests/clients/install_clients.sh DIR`` fills it). Unset, the client tests skip and say why (a
developer machine without the clients); set, a client missing from it FAILS the test, because CI
promised to install it.

Each :class:`Agent` is one client with its own ``HOME`` (and ``CODEX_HOME``) under a temporary
folder, a project folder with a ``.git`` marker, and ``crosstalk install <client>`` applied to
that ``HOME``; its hooks and MCP server reach one crosstalk identity through ``CROSSTALK_HOME``.
Every client run is a bounded subprocess (``subprocess.run`` with a timeout kills it).
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
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.clients.process import ROOT, LoggedRequest, StandinProcess
from tests.clients.script import CLIENT_API, Api
from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import (
    RELAY_DATA,
    Person,
    pair,
    short_tmp,
    stop_pid,
    wait_for_messages,
    wait_session_known,
    wait_until,
)

__all__ = ["short_tmp"]  # a fixture the client tests use by name

CLIENTS_ENV = "CROSSTALK_CLIENTS"
#: Seconds one client run may take before it is killed and the test fails.
RUN_TIMEOUT = 120.0
#: Seconds an op may take from one daemon through the relay to the other.
PROPAGATION = 60.0
SERVER = "crosstalk"


@attrs.frozen
class Pin:
    """One pinned client: its npm prefix under the cache, its binary and its stand-in API."""

    client: str
    prefix: str
    binary: str

    @property
    def api(self) -> Api:
        return CLIENT_API[self.client]


CLAUDE = Pin("claude", "claude-2.1.197", "claude")
CLAUDE_NEW = Pin("claude", "claude-2.1.332", "claude")
CODEX = Pin("codex", "codex-0.171.0", "codex")
QWEN = Pin("qwen", "qwen-0.15.10", "qwen")
GEMINI = Pin("gemini", "gemini-0.61.0", "gemini")


def clients_root() -> Path:
    """The folder holding the pinned clients; skips (saying why) when none is configured."""
    root = os.environ.get(CLIENTS_ENV)
    if not root:
        reason = (
            f"{CLIENTS_ENV} is not set, so the real agent clients are not installed here; run "
            f"tests/clients/install_clients.sh DIR and export {CLIENTS_ENV}=DIR to run this"
        )
        print(reason)
        pytest.skip(reason)
    return Path(root)


def client_binary(pin: Pin) -> Path:
    """The pinned client's executable; skip when no cache is configured, fail when it lacks it."""
    root = clients_root()
    path = root / pin.prefix / "node_modules" / ".bin" / pin.binary
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"{CLIENTS_ENV}={root} has no {pin.prefix} client at {path}: install it")
    return path


def write_script(path: Path, steps: list[dict[str, Any]]) -> Path:
    """Write a stand-in script file and return its path."""
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return path


def mcp_call(
    pin: Pin, tool: str, arguments: dict[str, Any], call_id: str, when: dict[str, Any]
) -> dict[str, Any]:
    """A script step answering ``when`` with a call of our MCP tool ``tool`` (once)."""
    return {
        "when": when,
        "reply": {"tool": tool, "server": SERVER, "call_id": call_id, "arguments": arguments},
        "times": 1,
    }


def after(call_id: str, text: str) -> dict[str, Any]:
    """A script step closing the turn once the client returns the result of ``call_id``."""
    return {
        "when": {"tool_result_for": call_id},
        "reply": {"text": text, "echo_tool_result": True},
    }


class Agent:
    """One agent client installed into a throwaway HOME, acting for ``person``."""

    def __init__(self, pin: Pin, person: Person, root: Path, standin: StandinProcess) -> None:
        self.pin = pin
        self.binary = client_binary(pin)
        self.person = person
        self.standin = standin
        self.home = root / "home"
        self.codex_home = self.home / ".codex"
        self.project = root / "project"
        self.runs: list[subprocess.CompletedProcess[str]] = []
        for folder in (self.home, self.codex_home, self.project / ".git"):
            folder.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        """A clean environment: nothing of the developer's own clients or keys leaks in."""
        node_dir = str(self.binary.parent)
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
        url = self.standin.url
        env = {
            **keep,
            "PATH": os.pathsep.join([node_dir, str(Path(sys.executable).parent),
                                     os.environ.get("PATH", "/usr/bin:/bin")]),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            "CROSSTALK_HOME": str(self.person.home),
            "CROSSTALK_RELAY": self.person.relay,
            "PYTHONPATH": str(ROOT),
            "NO_COLOR": "1",
            "TERM": "dumb",
            # Claude Code
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "ENABLE_TOOL_SEARCH": "false",
            # -p would otherwise call the model before the MCP server is up (measured)
            "MCP_CONNECTION_NONBLOCKING": "false",
            # Codex
            "STANDIN_API_KEY": "dummy",
            # Qwen Code
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "dummy",
            "OPENAI_MODEL": "standin-model",
            # Gemini CLI
            "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": "dummy",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        return env

    def install(self) -> dict[str, Any]:
        """``crosstalk install <client> --json`` into this agent's HOME; its JSON answer."""
        proc = subprocess.run(
            [sys.executable, "-m", "crosstalk", "install", self.pin.client, "--json",
             "--home", str(self.person.home)],
            capture_output=True, text=True, timeout=60, env=self.env(), cwd=ROOT, check=False,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def run(
        self, argv: list[str], *, timeout: float = RUN_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        """Run the client (bounded) in the project folder; kept in ``runs`` for failure output."""
        proc = subprocess.run(
            [str(self.binary), *argv], capture_output=True, text=True, timeout=timeout,
            env=self.env(), cwd=self.project, stdin=subprocess.DEVNULL, check=False,
        )
        self.runs.append(proc)
        return proc

    def requests(self) -> list[LoggedRequest]:
        """Model requests from this agent (the stand-in's log, model APIs only)."""
        return [r for r in self.standin.requests() if r.api is not None and not _router(r)]

    def debug(self) -> str:
        """What to print when an assertion fails: the last run's output and the daemon log."""
        last = self.runs[-1] if self.runs else None
        out = "" if last is None else f"rc={last.returncode}\nstdout={last.stdout[-3000:]}\n" \
                                      f"stderr={last.stderr[-3000:]}"
        return f"{out}\ndaemon.log:\n{self.person.log_tail()}"


def _router(request: LoggedRequest) -> bool:
    """Gemini CLI's model-routing classifier (a JSON ``generateContent``), not the agent's turn."""
    return request.api == "gemini" and "streamGenerateContent" not in request.path


def new_session_id() -> str:
    """A fresh session id in the UUID form clients accept."""
    return str(uuid.uuid4())


@pytest.fixture(scope="module")
def room() -> Iterator[tuple[Person, Person]]:
    """ana and ben, paired into one room on a relay of their own, shared by a module's tests
    (pairing costs seconds; each test uses its own words, facts and tasks). Daemons and relay
    are stopped by pid afterwards."""
    from tests.relay.process import RelayProcess

    clients_root()  # no clients here: skip before paying for a relay and a pairing
    root = Path(tempfile.mkdtemp(prefix="ct-room-", dir=SHORT_SCRATCH))
    relay = RelayProcess(root / RELAY_DATA, root / "relay.stderr")
    relay.start()
    url = f"ws://127.0.0.1:{relay.port}"
    ana, ben = Person(root / "ana", url), Person(root / "ben", url)
    try:
        pair(ana, ben)
        yield ana, ben
    finally:
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        relay.kill(signal.SIGTERM)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def standin_factory(short_tmp: Path) -> Iterator[Any]:
    """Start stand-in servers with a script (steps); every one is stopped by pid afterwards."""
    started: list[StandinProcess] = []

    def start(name: str, steps: list[dict[str, Any]]) -> StandinProcess:
        script = write_script(short_tmp / f"{name}.script.json", steps)
        server = StandinProcess(short_tmp / f"{name}.jsonl", script=script, lifetime=300)
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


def facts_seen(person: Person) -> list[str]:
    return [str(f["text"]) for f in person.json("facts")["facts"]]


def tasks_of(person: Person) -> list[dict[str, Any]]:
    return list(person.json("tasks")["tasks"])


def task_at(person: Person, task_id: str) -> dict[str, Any] | None:
    """The task with ``task_id`` as ``person`` sees it, or None."""
    return next((t for t in tasks_of(person) if t["id"] == task_id), None)


def wait_fact(person: Person, text: str) -> None:
    """Bounded wait until ``person`` has the fact ``text``."""
    wait_until(lambda: text in facts_seen(person), timeout=PROPAGATION, what=f"fact {text!r}")


# --- the four checks every client gets (issue 10 §3) -------------------------------------------

#: Words of a message to the agent; none may show in the notice, all in crosstalk_read's result.
SECRET_WORDS = ("periwinkle", "zeppelin", "quokka")


class Driver:
    """How a client is told to start a session and to go on with one; each client subclasses."""

    pin: Pin

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def start(self, prompt: str) -> str:
        """Run a new non-interactive session with ``prompt``; its session id."""
        raise NotImplementedError

    def resume(self, session: str, prompt: str) -> None:
        """Run ``prompt`` as the next turn of ``session``."""
        raise NotImplementedError

    def checked(self, proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
        assert proc.returncode == 0, self.agent.debug()
        return proc


def agent_for(
    pin: Pin, person: Person, root: Path, standin_factory: Any, steps: list[dict[str, Any]]
) -> Agent:
    """A stand-in playing ``steps`` and an agent installed for ``person`` pointing at it."""
    standin = standin_factory(f"{pin.prefix}-{person.home.name}", steps)
    agent = Agent(pin, person, root / f"{pin.prefix}-{person.home.name}", standin)
    installed = agent.install()
    assert installed["client"] == pin.client and installed["files"], installed
    return agent


def check_working_set(
    make_driver: Any, pin: Pin, room: tuple[Person, Person], root: Path, standin_factory: Any
) -> None:
    """A fact ben added reaches the first model request of a new session of ana's agent."""
    ana, ben = room
    fact = f"the upload bucket is named harbor-{pin.prefix}"
    ben.json("facts", "add", fact)
    wait_fact(ana, fact)
    agent = agent_for(pin, ana, root, standin_factory, [])
    make_driver(agent).start("hello there")
    requests = agent.requests()
    assert requests, agent.debug()
    assert requests[0].contains(fact), agent.debug()


def check_send(
    make_driver: Any, pin: Pin, room: tuple[Person, Person], root: Path, standin_factory: Any
) -> None:
    """The model's scripted crosstalk_send reaches ben, with the words it was given."""
    ana, ben = room
    text = f"hello ben from {pin.prefix}"
    steps = [
        mcp_call(pin, "crosstalk_send", {"to": "ben", "text": text, "intent": "question"},
                 "call_send_1", {"user_text_contains": "please tell ben"}),
        after("call_send_1", "told ben"),
    ]
    agent = agent_for(pin, ana, root, standin_factory, steps)
    make_driver(agent).start("please tell ben hello")
    assert any(r.step == 1 for r in agent.requests()), agent.debug()  # the tool result came back
    got = wait_for_messages(ben, 1, timeout=PROPAGATION)
    assert [m["text"] for m in got] == [text], (got, agent.debug())


def check_notice_then_read(
    make_driver: Any, pin: Pin, room: tuple[Person, Person], root: Path, standin_factory: Any
) -> None:
    """ben's message is announced on the session's next hook event by a notice naming ben
    without his words; the scripted crosstalk_read then returns the words."""
    ana, ben = room
    words = " ".join(SECRET_WORDS)
    steps = [
        mcp_call(pin, "crosstalk_read", {}, "call_read_1", {"user_text_contains": "check inbox"}),
        after("call_read_1", "read it"),
    ]
    agent = agent_for(pin, ana, root, standin_factory, steps)
    driver = make_driver(agent)
    session = driver.start("just starting")
    before = len(agent.requests())
    wait_session_known(ben, "ana", session)
    ben.json("send", f"ana/{session}", words, "--intent", "question")  # this agent
    wait_until(lambda: pending_notices(ana) > 0, timeout=PROPAGATION,
               what="a notice for ana's session the hook will take")
    driver.resume(session, "check inbox")
    later = agent.requests()[before:]
    assert later, agent.debug()
    asked = later[0]
    assert asked.step == 0 and asked.contains("crosstalk-notice"), agent.debug()
    notice = next(s for s in strings(asked.body) if "crosstalk-notice" in s)
    assert 'from="ben"' in notice and "ben" in notice
    for request in later[:1]:
        assert not any(word in s for s in strings(request.body) for word in SECRET_WORDS), notice
    answered = [r for r in later if r.step == 1]
    assert answered, agent.debug()
    assert all(answered[0].contains(word) for word in SECRET_WORDS), agent.debug()


def check_task_claim(
    make_driver: Any, pin: Pin, room: tuple[Person, Person], root: Path, standin_factory: Any
) -> None:
    """A task ben added, claimed by ana's model through crosstalk_task_claim, shows as claimed
    by ana at ben's."""
    ana, ben = room
    task = ben.json("tasks", "add", f"fix the upload path ({pin.prefix})")
    wait_until(lambda: task_at(ana, task["id"]) is not None, timeout=30, what="the task at ana's")
    steps = [
        mcp_call(pin, "crosstalk_task_claim", {"id": task["id"]}, "call_claim_1",
                 {"user_text_contains": "take the task"}),
        after("call_claim_1", "claimed"),
    ]
    agent = agent_for(pin, ana, root, standin_factory, steps)
    make_driver(agent).start("take the task please")
    assert any(r.step == 1 and r.contains("won") for r in agent.requests()), agent.debug()
    wait_until(lambda: (task_at(ben, task["id"]) or {}).get("state") == "claimed",
               timeout=PROPAGATION, what="the claim at ben's")
    assert (task_at(ben, task["id"]) or {}).get("claimed_by") == "ana"


def pending_notices(person: Person) -> int:
    """How many surfaced notices wait, shown to no session yet, and are older than the push
    grace, so the next hook event takes them (Claude Code 2.1.332 registers an inbox socket; for
    such a session the hook leaves a notice younger than ``PUSH_GRACE`` to the daemon's push)."""
    from crosstalk.client import call
    from crosstalk.hook.flow import PUSH_GRACE
    from crosstalk.paths import Home

    reply = call(Home(person.home), "notices", {"pending": True}, timeout=30.0)
    cutoff = time.time() - PUSH_GRACE
    rows = [r for r in reply.get("notices") or [] if float(r.get("surfaced_at") or 0) < cutoff]
    return len(rows)


def strings(value: object) -> list[str]:
    """Every string inside a parsed JSON value."""
    from tests.clients.turns import strings_in

    return list(strings_in(value))
