"""Every command, walked with bad inputs, fails the way CLI.md and docs/errors.md say (issue 39,
item 4): a code docs/errors.md lists, exit 1 (2 for usage), one plain sentence, no traceback,
and nothing left behind: no home made, no daemon started, no file written in the current
directory.

The commands come from the typer app itself (:func:`commands`), so a new one is walked without
being named here; a command with required arguments gets placeholder words unless
:data:`ARGS` gives it better ones, and :data:`NOT_WALKED` says why the few that cannot be walked
on a home without an identity are left to their own tests. The CLI runs in-process (typer's
runner on :func:`crosstalk.cli.main.app_for`), so the walk costs a few seconds.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from crosstalk.cli.main import app, app_for
from tests.conftest import SHORT_SCRATCH
from tests.docs.test_error_codes import documented_codes


@functools.cache
def click_app() -> typer.core.TyperGroup:
    """The whole app as click sees it (built once: typer reads every command's signature)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return group


def commands() -> list[tuple[str, ...]]:
    """Every command path typer runs: leaves, and groups that run without a subcommand."""
    found: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.append(path)
            return
        if path and getattr(command, "invoke_without_command", False):
            found.append(path)
        for name, sub in sorted(subcommands.items()):
            walk(sub, (*path, name))

    walk(click_app(), ())
    return found


# Arguments that reach what a command does (placeholders would be refused as usage first).
ARGS: dict[tuple[str, ...], list[str]] = {
    ("send",): ["ana", "hello"],
    ("ask",): ["ana", "are you there?"],
    ("answer",): ["ana", "c0ffee", "yes"],
    ("post",): ["the build is green"],
    ("rename",): ["ana", "anna"],
    ("trust",): ["ana", "ask"],
    ("mute",): ["ana", "30"],
    ("backup",): ["out.backup"],
    ("restore",): ["missing.backup"],
    ("reserve",): ["src/app.py"],
    ("release",): ["r-0000"],
    ("decide",): ["use sqlite"],
    ("slice",): ["m-0000"],
    ("thread",): ["t-0000"],
}

# Commands that make an identity, start something by request, or are another program's
# protocol: each has its own tests.
NOT_WALKED = {
    ("room", "new"): "makes the identity (tests/e2e/test_pairing.py)",
    ("room", "join"): "makes the identity (tests/e2e/test_pairing.py); a bad code is usage",
    ("daemon", "run"): "starts the daemon by request (tests/e2e/test_daemon.py)",
    ("daemon", "start"): "starts the daemon by request (tests/e2e/test_daemon.py)",
    ("daemon", "restart"): "starts the daemon by request (tests/e2e/test_cli_expected.py)",
    ("relay", "serve"): "the relay: no home (tests/relay)",
    ("relay", "start"): "the local relay: no home (tests/e2e/test_cli_expected.py)",
    ("relay", "stop"): "the local relay: no home (tests/e2e/test_cli_expected.py)",
    ("relay", "status"): "the relay: no home (tests/e2e/test_cli_expected.py)",
    ("server",): "the MCP server on stdio; its tools answer not_set_up (tests/mcp/test_server.py)",
    ("hook",): "the hook program's own contract (tests/hook)",
    ("demo",): "throwaway homes of its own (tests/e2e/test_demo.py)",
    ("install",): "writes the client's configuration, not the home (tests/install)",
    ("uninstall",): "writes the client's configuration, not the home (tests/install)",
}

# What a command answers on a home with no identity, when it is not ``not_set_up``: a report
# (exit status, no error), or another refusal that comes first.
NO_IDENTITY: dict[tuple[str, ...], int | str] = {
    ("status",): 0,
    ("doctor",): 1,  # exit 0 only when ok; a missing home is a failing check
    ("daemon", "status"): 0,
    ("daemon", "stop"): 0,
    ("guard", "install"): "not_in_repository",
    ("guard", "uninstall"): "not_in_repository",
    ("guard", "check"): "not_in_repository",
    ("restore",): "damaged_backup",  # restoring is how a home without one gets one
}

WALKED = [path for path in commands() if path not in NOT_WALKED]


def args_for(path: tuple[str, ...]) -> list[str]:
    """``path`` with arguments: from :data:`ARGS`, else a placeholder per required argument."""
    if path in ARGS:
        return [*path, *ARGS[path]]
    command: object = click_app()
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]  # a group on the way
    required = [
        p for p in command.params  # type: ignore[attr-defined]  # a click command
        if p.param_type_name == "argument" and p.required
    ]
    return [*path, *("x" for _ in required)]


class Ran:
    def __init__(self, code: int, out: str, err: str, exception: BaseException | None) -> None:
        self.code, self.out, self.err, self.exception = code, out, err, exception


def run(args: list[str]) -> Ran:
    """The CLI in this process, as the console script runs it."""
    result = CliRunner().invoke(app_for(args), args, prog_name="crosstalk")
    exception = None if isinstance(result.exception, SystemExit) else result.exception
    return Ran(result.exit_code, result.stdout, result.stderr, exception)


def assert_clean_error(ran: Ran, *, json_mode: bool, code: str | None = None) -> str:
    """One error, told the CLI.md way; returns its code (the human form must be told the code
    its ``--json`` twin printed: the sentence alone does not carry it)."""
    assert ran.exception is None, f"{type(ran.exception).__name__}: {ran.exception}"
    if json_mode:
        lines = ran.out.splitlines()
        assert len(lines) == 1, ran.out
        error = json.loads(lines[0])["error"]
        got, message = error["code"], error["message"]
    else:
        assert ran.out == "" and ran.err.startswith("crosstalk: "), (ran.out, ran.err)
        assert ran.err.count("\n") == 1, ran.err
        got, message = code, ran.err.removeprefix("crosstalk: ")
    assert ran.code == (2 if got == "usage" else 1), (ran.code, got, message)
    assert got in documented_codes(), f"{got} is not in docs/errors.md"
    if code is not None:
        assert got == code, message
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert not any(noise in message for noise in ("<class ", "object at 0x", "Errno")), message
    return str(got)


def processes_naming(home: Path) -> list[int]:
    """Pids of processes whose command line names ``home`` (a daemon started for it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if os.fsencode(str(home)) in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty current directory, and a passphrase so backup and restore never prompt."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("CROSSTALK_PASSPHRASE", "correct horse")
    yield cwd
    for pid in processes_naming(tmp_path):  # a daemon a failing walk started: stop it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def test_the_walk_sees_every_command() -> None:
    """The enumeration finds the commands (so the walk can fail), and the tables name only
    real ones."""
    found = set(commands())
    assert {("read",), ("room", "new"), ("tasks", "claim"), ("tasks",), ("decide",)} <= found
    assert set(NOT_WALKED) <= found and set(ARGS) <= found and set(NO_IDENTITY) <= found


@pytest.mark.parametrize("fresh", ["missing", "empty"])
@pytest.mark.parametrize("path", WALKED, ids=" ".join)
def test_a_home_without_an_identity_is_refused_and_nothing_is_made(
    path: tuple[str, ...], fresh: str, tmp_path: Path, place: Path
) -> None:
    """On a home that does not exist, or exists empty: not_set_up (or the command's documented
    answer), one sentence, and no home, daemon or file in the current directory afterwards."""
    home = tmp_path / "home"
    if fresh == "empty":
        home.mkdir()
    expected = NO_IDENTITY.get(path, "not_set_up")
    for json_mode in (True, False):
        ran = run([*args_for(path), "--home", str(home), *(["--json"] if json_mode else [])])
        if isinstance(expected, int):
            assert ran.exception is None and ran.code == expected, (ran.out, ran.err)
        else:
            assert_clean_error(ran, json_mode=json_mode, code=expected)
        assert home.exists() == (fresh == "empty"), f"{' '.join(path)} made the home"
        assert not home.exists() or list(home.iterdir()) == [], list(home.iterdir())
        assert list(place.iterdir()) == [], f"{' '.join(path)} wrote {list(place.iterdir())}"
        assert processes_naming(home) == [], f"{' '.join(path)} started a daemon"


def test_read_on_a_new_home_through_the_fast_path_makes_nothing(
    tmp_path: Path, place: Path
) -> None:
    """``crosstalk read --home NEW`` (the typer-free path agents run): not_set_up, exit 1, and
    neither the home nor a daemon afterwards."""
    home = tmp_path / "new-home"
    done = subprocess.run(
        [sys.executable, "-m", "crosstalk", "read", "--home", str(home), "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "not_set_up"
    assert not home.exists() and processes_naming(home) == []


# --- with an identity: unknown names, numbers out of range, huge text, text like an option ------

HUGE = "x" * (1 << 20)

# (arguments, the code). Names nobody has: a peer, a room, a message, a task, a fact, a
# reservation; numbers below or past their range; a 1 MiB argument; words that look like options.
BAD_INPUTS: list[tuple[list[str], str]] = [
    (["send", "nobody", "hi"], "unknown_peer"),
    (["ask", "nobody", "hi"], "unknown_peer"),
    (["rename", "nobody", "somebody"], "unknown_peer"),
    (["trust", "nobody", "ask"], "unknown_peer"),
    (["mute", "nobody", "5"], "unknown_peer"),
    (["answer", "nobody", "c0ffee", "yes"], "unknown_message"),  # no such question first
    (["slice", "m-nosuch"], "unknown_message"),
    (["slice", "c0ffee00"], "unknown_message"),
    (["thread", "t-nosuch"], "unknown_message"),
    (["room", "leave", "nosuch"], "unknown_room"),
    (["room", "invite", "nosuch", "nobody"], "unknown_room"),
    (["room", "kick", "nosuch", "nobody"], "unknown_room"),
    (["room", "edits", "nosuch"], "unknown_room"),
    (["decisions", "--room", "nosuch"], "unknown_room"),
    (["decide", "use sqlite"], "not_in_repository"),  # the cwd is no repository; no --repo
    (["facts", "--room", "nosuch"], "unknown_room"),
    (["tasks", "add", "do it", "--room", "nosuch"], "unknown_room"),
    (["release", "r-nosuch"], "not_in_repository"),  # a word not an id is a path
    (["mute", "--", "-5"], "usage"),
    (["mute", "1e308"], "usage"),
    (["prune", "--older-than", "-1"], "usage"),
    (["ask", "nobody", "hi", "--timeout", "-1"], "usage"),
    (["ask", "nobody", "hi", "--timeout", "1e308"], "usage"),
    (["edits", "--window", "-1"], "usage"),
    (["slice", "m-nosuch", "99999999999999999999999"], "unknown_message"),
    (["slice", "m-nosuch", "-1"], "usage"),  # looks like an option
    (["post", HUGE], "too_large"),
    (["post", "hi", "--source", HUGE], "too_large"),
    (["post", "hi", "--source", "s" * 65], "usage"),  # a source is a name: 64 at most
    (["send", "nobody", HUGE], "too_large"),  # a request past 1 MiB is refused whole
    (["facts", "add", HUGE, "--room", "nosuch"], "too_large"),
    (["room", "create", HUGE], "too_large"),
    (["rename", "nobody", HUGE], "too_large"),
    (["decide", HUGE, "--repo", "."], "too_large"),
    (["send", "--bogus", "hi"], "usage"),
    (["post", "--help-me"], "usage"),
]


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home with an identity and its daemon running (stopped by pid afterwards)."""
    from crosstalk.store.identity import new_identity, save_identity

    home = Path(tempfile.mkdtemp(prefix="ct-walk-", dir=SHORT_SCRATCH)) / "ana"
    home.mkdir(mode=0o700)
    save_identity(home / "identity.json", new_identity("ana"))
    started = subprocess.run(
        [sys.executable, "-m", "crosstalk", "daemon", "start", "--json", "--home", str(home)],
        capture_output=True, text=True, timeout=90, check=True,
    )
    pid = int(json.loads(started.stdout)["pid"])
    yield home
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(home.parent, ignore_errors=True)


@pytest.mark.parametrize(
    ("args", "code"), BAD_INPUTS, ids=[" ".join(a)[:40] for a, _ in BAD_INPUTS]
)
def test_bad_input_is_one_coded_sentence_and_writes_nothing(
    args: list[str], code: str, alone: Path, place: Path
) -> None:
    """Each bad input: its code, exit 1 (2 for usage), one sentence, nothing in the cwd."""
    for json_mode in (True, False):
        ran = run([*args, "--home", str(alone), *(["--json"] if json_mode else [])])
        assert_clean_error(ran, json_mode=json_mode, code=code)
        assert list(place.iterdir()) == []


def test_a_post_source_of_64_characters_is_taken_and_65_is_refused_saying_so(
    alone: Path, place: Path
) -> None:
    """``post --source`` takes a name up to 64 characters; past that the sentence says 64."""
    ran = run(["post", "hi", "--source", "s" * 64, "--home", str(alone), "--json"])
    assert ran.code == 0, ran.out
    refused = run(["post", "hi", "--source", "s" * 65, "--home", str(alone), "--json"])
    assert "64" in json.loads(refused.out)["error"]["message"]
