"""No output of the MCP server, the hook or the CLI ever contains a room key or a private key.

Two people are paired through the real CLI on a real relay and exchange a message, a fact and a
task. Then every output is collected: each MCP tool's result, the hook's answer for each
client's text-carrying events, and the CLI's commands in JSON and human form. Each is scanned
for every secret in both homes (the identity seeds, the full Ed25519 signing key, and every
room key in ``state.db``), raw and as base64 (standard and URL-safe, padded or not) and hex.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nacl.signing
import trio
from mcp import Client

from crosstalk.core.dialects import CLIENTS, dialect_for
from crosstalk.mcp.tools import TOOLS
from crosstalk.store.identity import load_identity
from tests.e2e.conftest import Person, pair, people, relay_url, short_tmp, stop_pid, wait_until
from tests.mcp.test_server import git_project, server_params

__all__ = ["people", "relay_url", "short_tmp"]  # fixtures used by name below

TOOL_ARGS: dict[str, dict[str, Any]] = {
    "crosstalk_send": {"to": "ben", "text": "hi"},
    "crosstalk_read": {"all": True},
    "crosstalk_read_slice": {"message_id": "nope"},
    "crosstalk_ask": {"to": "ben", "text": "there?", "timeout_seconds": 0.5},
    "crosstalk_answer": {"to": "ben", "correlation": "c0ffee", "text": "yes"},
    "crosstalk_handoff": {"to": "ben", "text": "yours"},
    "crosstalk_wait": {"timeout_seconds": 0.2},
    "crosstalk_task_add": {"text": "a task"},
    "crosstalk_task_claim": {"id": "nope"},
    "crosstalk_task_done": {"id": "nope"},
    "crosstalk_remember": {"text": "a fact"},
    "crosstalk_confirm": {"id": "nope"},
    "crosstalk_correct": {"id": "nope", "because": "x"},
    "crosstalk_decide": {"text": "a decision"},
}
CLI_COMMANDS = [
    ("status",),
    ("doctor",),
    ("room", "list"),
    ("read", "--all"),
    ("facts",),
    ("tasks",),
    ("trust",),
    ("mute", "ben", "1"),
    ("attention",),
    ("daemon", "status"),
]


def secrets_of(home: Path) -> list[bytes]:
    """Every secret of one home: identity seeds, the signing key, and all room keys."""
    record = load_identity(home / "identity.json")
    assert record is not None
    signing = nacl.signing.SigningKey(record.signing_seed)
    found = [record.signing_seed, record.box_secret, bytes(signing._signing_key)]
    conn = sqlite3.connect(home / "state.db")
    try:
        found += [bytes(row[0]) for row in conn.execute("SELECT key FROM room_keys")]
    finally:
        conn.close()
    return found


def forms(secret: bytes) -> list[str]:
    """The textual forms a secret could leak in."""
    std, url = base64.b64encode(secret).decode(), base64.urlsafe_b64encode(secret).decode()
    return [secret.hex(), secret.hex().upper(), std, url, std.rstrip("="), url.rstrip("=")]


def assert_no_secret(outputs: list[tuple[str, bytes]], secrets: list[bytes]) -> None:
    for where, data in outputs:
        text = data.decode("utf-8", "replace")
        for secret in secrets:
            assert secret not in data, f"raw secret in {where}"
            for form in forms(secret):
                assert form not in text, f"secret in {where}"


async def mcp_outputs(person: Person, project: Path) -> list[tuple[str, bytes]]:
    collected: list[tuple[str, bytes]] = []
    with trio.fail_after(120):
        async with Client(server_params(person, project), mode="legacy") as c:
            collected.append(("mcp instructions", (c.instructions or "").encode()))
            tools = await c.list_tools()
            collected.append(("mcp tools/list", tools.model_dump_json().encode()))
            for spec in TOOLS:
                result = await c.call_tool(spec.name, TOOL_ARGS.get(spec.name, {}))
                collected.append((spec.name, result.model_dump_json().encode()))
    return collected


def hook_outputs(person: Person, project: Path) -> list[tuple[str, bytes]]:
    """Each client's hook answers, the clients four at a time (each its own session, whose
    events go in order); one after another they took most of the test's time."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = pool.map(lambda client: client_hook_outputs(person, project, client), CLIENTS)
        return [answer for client_answers in answers for answer in client_answers]


def client_hook_outputs(person: Person, project: Path, client: str) -> list[tuple[str, bytes]]:
    collected = []
    env = {**os.environ, "CROSSTALK_HOME": str(person.home), "CROSSTALK_RELAY": person.relay}
    dialect = dialect_for(client)
    carriers = [name for name, spec in dialect.events.items() if spec.carries_text]
    for event in (*dialect.registered, carriers[0]):  # again after Stop: what surfaced
        stdin = json.dumps(
            {
                "hook_event_name": event,
                "event": event,
                "session_id": f"s-{client}",
                "conversationId": f"s-{client}",
                "cwd": str(project),
            }
        )
        done = subprocess.run(
            [sys.executable, "-m", "crosstalk.hook.main", "--client", client, event],
            input=stdin.encode(),
            capture_output=True,
            timeout=30,
            env=env,
            check=False,
        )
        collected.append((f"hook {client} {event}", done.stdout + done.stderr))
    return collected


def cli_outputs(*people: Person) -> list[tuple[str, bytes]]:
    """Every CLI command's output for each person, in JSON and in words. Four at a time: each is
    a process of its own that mostly waits for Python to start (40 in a row took 20 s)."""
    runs = [(person, command + extra) for person in people for command in CLI_COMMANDS
            for extra in (("--json",), ())]

    def one(run: tuple[Person, tuple[str, ...]]) -> tuple[str, bytes]:
        person, args = run
        done = person.run(*args)
        return f"{person.home.name}: {' '.join(args)}", (done.stdout + done.stderr).encode()

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, runs))


async def test_no_output_anywhere_contains_a_room_key_or_a_private_key(
    people: list[Person], short_tmp: Path
) -> None:
    """MCP results, hook answers and CLI output of a paired home hold no secret in any form."""
    ana, ben = people[0], people[1]
    project = git_project(short_tmp / "proj")
    try:
        await trio.to_thread.run_sync(lambda: pair(ana, ben))
        ben.json("send", "ana", "a question for ana", "--intent", "question")
        ana.json("facts", "add", "the build is green")
        # Not by reading it: a read message's notice is withdrawn, and the hook must show one.
        wait_until(
            lambda: any(p["unread"] for p in ana.json("peers")["peers"]),
            timeout=30,
            what="ben's message",
        )
        secrets = secrets_of(ana.home) + secrets_of(ben.home)
        assert len(secrets) >= 8  # two identities (3 each) and the shared room's key, twice
        # The hook first: the MCP tools read (and so acknowledge) ben's message, which withdraws
        # its notice.
        outputs = await trio.to_thread.run_sync(lambda: hook_outputs(ana, project))
        outputs += await mcp_outputs(ana, project)
        outputs += await trio.to_thread.run_sync(lambda: cli_outputs(ana, ben))
        assert len(outputs) > 60
        hooks = [data for where, data in outputs if where.startswith("hook")]
        assert any(b"the build is green" in data for data in hooks)  # the working set came
        assert any(b"call crosstalk_read" in data for data in hooks)  # and ben's notice
        assert_no_secret(outputs, secrets)
    finally:
        for person in (ana, ben):
            if (pid := person.daemon_pid()) is not None:
                stop_pid(pid)
