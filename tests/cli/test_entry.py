"""The entry point's fast paths take only the plain forms of `server`, `hook`, `read` and
`daemon run`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crosstalk.cli.entry import _daemon_run_args, _server_args
from crosstalk.cli.output import run_reporting
from crosstalk.cli.reading import plain_args
from crosstalk.errors import CrosstalkError, UsageError


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], (True, None, "full")),
        (["--json"], (True, None, "full")),
        (["--home", "/tmp/h"], (True, "/tmp/h", "full")),
        (["--home=/tmp/h", "--json"], (True, "/tmp/h", "full")),
        (["--tools", "core", "--home", "/tmp/h"], (True, "/tmp/h", "core")),
        (["--tools=send,read"], (True, None, "send,read")),
        (["--help"], (False, None, "full")),
        (["--home"], (False, None, "full")),
        (["--tools"], (False, None, "full")),
        (["extra"], (False, None, "full")),
    ],
)
def test_server_fast_path_accepts_only_home_tools_and_json(
    args: list[str], expected: tuple[bool, str | None, str]
) -> None:
    """Anything but --home/--tools/--json goes to the full CLI (which prints help or a usage
    error)."""
    assert _server_args(args) == expected


PLAIN = {"all_messages": False, "session": None, "json_output": False, "home": None}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], PLAIN),
        (["--json"], {**PLAIN, "json_output": True}),
        (["--all", "--json"], {**PLAIN, "all_messages": True, "json_output": True}),
        (["--session", "s1", "--home", "/tmp/h"], {**PLAIN, "session": "s1", "home": "/tmp/h"}),
        (["--home=/tmp/h", "--session=s1"], {**PLAIN, "session": "s1", "home": "/tmp/h"}),
        (["--help"], None),
        (["--home"], None),
        (["--home", "--json"], None),
        (["--home="], None),
        (["--bogus"], None),
        (["extra"], None),
    ],
)
def test_read_fast_path_accepts_only_its_own_options(
    args: list[str], expected: dict[str, object] | None
) -> None:
    """Anything but --all/--json/--session/--home, or a missing value, goes to the typer app."""
    assert plain_args(args) == expected


def test_a_command_run_outside_typer_prints_its_error_and_exit_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """run_reporting prints the JSON error envelope and returns 1, or 2 for a usage error."""

    def refused() -> None:
        raise CrosstalkError("no such session", code="unknown_session")

    def misused() -> None:
        raise UsageError("say which")

    assert run_reporting(refused, json_mode=True) == 1
    assert capsys.readouterr().out == (
        '{"error": {"code": "unknown_session", "message": "no such session"}}\n'
    )
    assert run_reporting(misused, json_mode=False) == 2
    assert capsys.readouterr().err == "crosstalk: say which\n"
    assert run_reporting(lambda: None, json_mode=True) == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], (False, False, None)),
        (["--json", "--detach", "--home", "/tmp/h"], (True, True, "/tmp/h")),
        (["--home=/tmp/h"], (False, False, "/tmp/h")),
        (["--help"], None),
        (["--home"], None),
        (["--home", "--json"], None),
        (["extra"], None),
    ],
)
def test_daemon_run_fast_path_accepts_only_its_own_options(
    args: list[str], expected: tuple[bool, bool, str | None] | None
) -> None:
    """`daemon run` skips typer only with --json/--detach/--home; anything else gets typer."""
    assert _daemon_run_args(args) == expected


def test_hook_help_prints_the_commands_help_not_the_hook_contract(tmp_path: Path) -> None:
    """``crosstalk hook --help`` is typer's help, exit 0: not the hook program's ``{}`` and an
    unknown-option error."""
    done = subprocess.run(
        [sys.executable, "-m", "crosstalk", "hook", "--help"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout and not done.stdout.startswith("{}")
    assert done.stderr == ""
