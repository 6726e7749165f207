"""A CLI command that only talks to the daemon imports nothing heavy, and still parses the same.

The subprocess tests run real commands against a fake daemon (a unix socket that answers each op
with a canned reply) while this test holds the home's lock, so no real daemon can start, and
report which modules the command loaded. The rest check that the one-command app built for a
call parses like the whole app, and that the names copied into help texts stay true.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from typer.testing import CliRunner

from crosstalk.cli import cmd_install, cmd_trust
from crosstalk.cli.main import app, app_for
from crosstalk.daemon.lock import DaemonLock, try_acquire
from crosstalk.paths import Home

#: What a daemon-talking command must not import: the daemon's runtime, crypto, the store, the
#: installers' YAML, typer 0.29's pydantic, the MCP SDK, the wire models and the relay.
HEAVY = (
    "trio", "nacl", "spake2", "sqlite3", "yaml", "pydantic", "pydantic_core", "mcp", "attr",
    "attrs", "cattrs", "relay", "crosstalk.store", "crosstalk.crypto", "crosstalk.install",
    "crosstalk.doctor.report", "crosstalk.daemon.tree", "crosstalk.wire", "crosstalk.core",
)  # fmt: skip

# Runs the real entry point with the given arguments, then names the heavy modules it loaded
# (after typer's SystemExit, too) on the last line of stderr.
PROBE = f"""
import json, sys
sys.argv = ["crosstalk", *sys.argv[1:]]
try:
    from crosstalk.cli.entry import main
    main()
finally:
    heavy = {HEAVY!r}
    loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
    sys.stderr.write("\\nHEAVY " + json.dumps(loaded) + "\\n")
"""

IMPORT_ONLY = PROBE.replace("main()", "pass")

LABEL, FINGERPRINT = "ana", "0123-4567-89ab-cdef"
REPLIES: dict[str, dict[str, Any]] = {
    "status": {
        "pid": 4242, "label": LABEL, "fingerprint": FINGERPRINT,
        "relay": {"url": "ws://127.0.0.1:9", "connected": True},
    },
    "read": {"messages": []},
    "send": {"id": "m1", "state": "queued", "to": ["ben"]},
    "peers": {"me": {"label": LABEL, "fingerprint": FINGERPRINT, "sessions": []}, "peers": []},
    "facts": {"facts": []},
    "tasks": {"tasks": []},
    "rooms": {"rooms": []},
    "trust": {"default": "ask", "local": "deliver", "rooms": {}, "people": {}, "pins": []},
    "attention": {"reached_last_hour": 2, "held": 1, "by_source": {"ben": 2}},
}  # fmt: skip


@pytest.fixture
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    """A short home whose lock this test holds, so the CLI never starts a real daemon."""
    h = Home(Path(tmp_path_factory.mktemp("ct", numbered=True)))
    h.ensure()
    held = try_acquire(h.lock)
    assert isinstance(held, DaemonLock)
    yield h
    held.release()


async def _answer(stream: trio.SocketStream) -> None:
    async with stream:
        request = b""
        while not request.endswith(b"\n"):
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            request += chunk
        op = json.loads(request)["op"]
        reply = REPLIES.get(op, {"ok": False, "error": {"code": "no_op", "message": op}})
        await stream.send_all(json.dumps({"ok": True, **reply}).encode() + b"\n")


async def _run_against_fake_daemon(home: Home, *args: str) -> tuple[str, list[str]]:
    """Run ``crosstalk ARGS --json --home HOME``; return its stdout and the heavy modules."""
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(home.socket))
    sock.listen(16)
    listener = trio.SocketListener(sock)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, _answer, [listener])
            argv = [*args, "--json", "--home", str(home.root)]
            done = await trio.run_process(
                [sys.executable, "-c", PROBE, *argv],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            nursery.cancel_scope.cancel()
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    return done.stdout.decode(), json.loads(stderr.rpartition("HEAVY ")[2])


# `attention` renders with the sans-IO core's own function (crosstalk.core.attention, on attrs);
# the core names a message's intent and kind by the wire's two enums (crosstalk.wire.kinds, which
# imports nothing of the wire's models: the package's __init__ is a docstring).
CORE_RENDERING = ("attr", "attrs", "crosstalk.core", "crosstalk.wire.kinds")


@pytest.mark.parametrize(
    ("args", "expected", "allowed"),
    [
        (("read",), {"messages": []}, ()),
        (("send", "ben", "hello"), REPLIES["send"], ()),
        (("peers",), REPLIES["peers"], ()),
        (("facts",), {"facts": []}, ()),
        (("tasks",), {"tasks": []}, ()),
        (("room", "list"), {"rooms": []}, ()),
        (("trust",), REPLIES["trust"], ()),
        (("attention",), REPLIES["attention"], CORE_RENDERING),
    ],
)
async def test_daemon_commands_import_nothing_heavy(
    home: Home, args: tuple[str, ...], expected: dict[str, Any], allowed: tuple[str, ...]
) -> None:
    """A command that only asks the daemon prints its answer and loads none of the heavy parts."""
    stdout, heavy = await _run_against_fake_daemon(home, *args)
    assert json.loads(stdout) == expected
    assert [m for m in heavy if not m.startswith(allowed) and m != "crosstalk.wire"] == []


async def test_plain_read_runs_without_typer(home: Home) -> None:
    """`read --json` (what agents run between turns) prints its answer without loading typer."""
    probe = PROBE.replace("heavy = ", "heavy = ('typer', 'click') + ")
    with trio.fail_after(60):
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        await sock.bind(str(home.socket))
        sock.listen(16)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, _answer, [trio.SocketListener(sock)])
            done = await trio.run_process(
                [sys.executable, "-c", probe, "read", "--json", "--home", str(home.root)],
                capture_stdout=True, capture_stderr=True, check=False,
            )
            nursery.cancel_scope.cancel()
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert json.loads(done.stdout.decode()) == {"messages": []}
    assert json.loads(stderr.rpartition("HEAVY ")[2]) == []


async def test_status_takes_identity_from_running_daemon(home: Home) -> None:
    """With a daemon answering, status shows its label and fingerprint without nacl or store."""
    stdout, heavy = await _run_against_fake_daemon(home, "status")
    shown = json.loads(stdout)
    assert (shown["label"], shown["fingerprint"]) == (LABEL, FINGERPRINT)
    assert shown["daemon"]["running"] is True and shown["relay"]["connected"] is True
    assert heavy == []


async def test_importing_the_cli_loads_nothing_heavy() -> None:
    """Importing the typer app (every command module) loads none of the heavy parts."""
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-c", IMPORT_ONLY], capture_stderr=True, check=True
        )
    assert json.loads(done.stderr.decode().rpartition("HEAVY ")[2]) == []


def test_known_command_gets_an_app_with_only_that_command() -> None:
    """`read` builds an app holding only `read`; `room list` one holding only the room group."""
    read = app_for(["read", "--json"])
    assert [c.name for c in read.registered_commands] == ["read"]
    assert read.registered_groups == []
    room = app_for(["room", "list"])
    assert room.registered_commands == []
    assert [g.name for g in room.registered_groups] == ["room"]


@pytest.mark.parametrize("args", [[], ["--help"], ["reed"], ["--json", "read"]])
def test_anything_else_gets_the_whole_app(args: list[str]) -> None:
    """No command, an option first, or an unknown name: typer's own help and errors answer."""
    assert app_for(args) is app


@pytest.mark.parametrize(
    "args",
    [
        ["read", "--help"],
        ["send", "--help"],
        ["room", "--help"],
        ["room", "new", "--help"],
        ["tasks", "add", "--help"],
        ["install", "--help"],
        ["send"],
        ["read", "--bogus"],
        ["room", "nope"],
    ],
)
def test_one_command_app_answers_like_the_whole_app(args: list[str]) -> None:
    """Help, usage errors and exit codes are the same from the lean app as from the whole one."""
    runner = CliRunner()
    whole = runner.invoke(app, args, prog_name="crosstalk")
    lean = runner.invoke(app_for(args), args, prog_name="crosstalk")
    assert (lean.exit_code, lean.output) == (whole.exit_code, whole.output)
    assert whole.exit_code in (0, 2)


def test_install_help_names_every_client() -> None:
    """The client list spelled out for `install --help` is crosstalk.install.CLIENTS."""
    from crosstalk.install import CLIENTS

    assert cmd_install.HELP_CLIENTS == CLIENTS


def test_trust_help_ladder_is_the_level_order() -> None:
    """The dial spelled out for `trust --help` is Level in order."""
    from crosstalk.core.levels import Level

    assert cmd_trust.LADDER == " < ".join(level.value for level in Level)
