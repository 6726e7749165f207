"""The pieces under the installers: recognising our commands, TOML blocks, JSON splicing."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import InvalidConfig, Refused
from crosstalk.install import Commands, Places, codex, install, resolve_commands, uninstall
from crosstalk.install.base import LAUNCHER, backup_path, is_ours
from crosstalk.install.jsondoc import splice_hooks
from crosstalk.install.tomlblock import BEGIN, END, toml_string

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("command", "client", "expected"),
    [
        ("/opt/bin/crosstalk-hook --client codex Stop", "codex", True),
        ("'/my dir/crosstalk-hook' --client codex Stop", "codex", True),
        ("/usr/bin/python3 -m crosstalk hook --client kimi Stop", "kimi", True),
        ("crosstalk hook --client qwen Stop", "qwen", True),
        ("/opt/bin/crosstalk-hook --client codex Stop", "claude", False),
        ("/opt/bin/crosstalk-hook Stop", "codex", False),
        ("other-tool --client codex", "codex", False),
        ("crosstalk send --client codex", "codex", False),
        ("unbalanced 'quote", "codex", False),
    ],
)
def test_is_ours_recognises_only_crosstalk_hook_commands_for_the_client(
    command: str, client: str, expected: bool
) -> None:
    """Our hook lines are recognised by program and --client, wherever they are installed."""
    assert is_ours(command, client) is expected


@given(st.text())
def test_toml_strings_round_trip_through_tomllib(value: str) -> None:
    """Any string we write into TOML reads back unchanged (quotes, backslashes, controls)."""
    assert tomllib.loads(f"k = {toml_string(value)}")["k"] == value


def test_backup_names_never_collide(tmp_path: Path) -> None:
    """Two backups in the same second get distinct names."""
    target = tmp_path / "settings.json"
    first = backup_path(target, NOW)
    first.write_text("x")
    second = backup_path(target, NOW)
    assert first.name == "settings.json.crosstalk-bak-20260304T050607Z"
    assert second.name == "settings.json.crosstalk-bak-20260304T050607Z-2"


def test_splice_keeps_others_handlers_that_share_a_group_with_ours(tmp_path: Path) -> None:
    """A group holding our handler and someone else's keeps theirs; ours is replaced."""
    old = "/old/crosstalk-hook --client claude Stop"
    new = "/new/crosstalk-hook --client claude Stop"
    other = {"type": "command", "command": "other-tool stop"}
    section: dict[str, object] = {
        "Stop": [{"hooks": [other, {"type": "command", "command": old}]}]
    }
    group = {"hooks": [{"type": "command", "command": new}]}
    splice_hooks(tmp_path / "x.json", section, {"Stop": [group]}, "claude")
    assert section == {"Stop": [group, {"hooks": [other]}]}


def test_codex_config_keeps_the_users_text_byte_for_byte(
    places: Places, commands: Commands
) -> None:
    """Our TOML block is appended after the user's text, which is kept exactly, comments too."""
    config = places.codex_home / "config.toml"
    config.parent.mkdir(parents=True)
    user = '# mine\nmodel = "o5"  # keep this comment\n'
    config.write_text(user)
    install("codex", places, commands, now=NOW)
    text = config.read_text()
    assert text.startswith(user)
    doc = tomllib.loads(text)
    assert doc["mcp_servers"]["crosstalk"] == {
        "command": commands.server_command,
        "args": commands.server_args,
        "default_tools_approval_mode": "approve",
        "env_vars": ["CROSSTALK_HOME", "CROSSTALK_RELAY"],
        "required": True,
    }
    uninstall("codex", places, now=NOW)
    assert config.read_text() == user


def test_codex_tables_written_inside_our_block_survive_reinstall_and_uninstall(
    places: Places, commands: Commands, tmp_path: Path
) -> None:
    """A table Codex adds between our markers (hook trust) is not ours, so it is kept."""
    install("codex", places, commands, now=NOW)
    config = places.codex_home / "config.toml"
    trust = '[hooks.state."x:stop:0:0"]\ntrusted_hash = "sha256:ab"\n'
    config.write_text(config.read_text().replace(END, trust + END))
    moved = Commands(crosstalk=(str(tmp_path / "crosstalk"),), hook=commands.hook)
    install("codex", places, moved, now=NOW)
    assert tomllib.loads(config.read_text())["hooks"]["state"]["x:stop:0:0"]
    uninstall("codex", places, now=NOW)
    text = config.read_text()
    assert BEGIN not in text and "crosstalk" not in text.replace("x:stop", "")
    assert tomllib.loads(text)["hooks"]["state"]["x:stop:0:0"]["trusted_hash"] == "sha256:ab"


def test_codex_refuses_a_crosstalk_server_the_user_wrote_by_hand(
    places: Places, commands: Commands
) -> None:
    """A hand-written [mcp_servers.crosstalk] cannot be merged: invalid_config, file unchanged."""
    config = places.codex_home / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp_servers.crosstalk]\ncommand = "mine"\n')
    before = config.read_bytes()
    with pytest.raises(InvalidConfig) as caught:
        install("codex", places, commands, now=NOW)
    assert str(config) in caught.value.message
    assert config.read_bytes() == before
    assert not (places.codex_home / "hooks.json").exists()


def test_codex_reports_untrusted_hooks_until_codex_records_trust(
    places: Places, commands: Commands
) -> None:
    """Each of our hooks without a trust record is listed; recording them all clears the list."""
    install("codex", places, commands, now=NOW)
    hooks_path = places.codex_home / "hooks.json"
    events = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
    assert codex.inspect(places).untrusted == events
    hooks = json.loads(hooks_path.read_text())["hooks"]
    records = "".join(
        f'[hooks.state."{codex.trust_key(hooks_path, event, 0, 0)}"]\ntrusted_hash = "sha256:1"\n'
        for event in hooks
    )
    config = places.codex_home / "config.toml"
    config.write_text(config.read_text() + records)
    assert codex.inspect(places).untrusted == ()


def test_codex_trust_key_uses_snake_case_event_names(tmp_path: Path) -> None:
    """The key format Codex uses: <hooks.json>:<event_snake>:<group>:<handler>."""
    key = codex.trust_key(tmp_path / "hooks.json", "UserPromptSubmit", 2, 0)
    assert key == f"{tmp_path / 'hooks.json'}:user_prompt_submit:2:0"


def test_resolve_commands_falls_back_to_python_dash_m(tmp_path: Path) -> None:
    """With no scripts beside the interpreter or on PATH, both run through ``python -m``."""
    python = str(tmp_path / "python3")
    found = resolve_commands(python, which=lambda name: None)
    assert found.crosstalk == (python, "-m", "crosstalk")
    assert found.hook == (python, "-m", "crosstalk", "hook")
    assert found.server_args == ["-m", "crosstalk", "server"]


def test_mcp_prints_the_generic_stdio_entry_and_writes_nothing(
    places: Places, commands: Commands
) -> None:
    """`install mcp` gives command and args for any MCP client and touches no file."""
    outcome = install("mcp", places, commands)
    assert outcome.entry == {"command": commands.server_command, "args": ["server"]}
    assert outcome.files == [] and list(places.home.iterdir()) == []


def test_path_links_crosstalk_into_local_bin_and_says_when_it_is_not_on_path(
    places: Places, commands: Commands
) -> None:
    """`install path` makes ~/.local/bin/crosstalk; a second run changes nothing."""
    first = install("path", places, commands, environ_path="/usr/bin")
    link = places.bin_dir / "crosstalk"
    assert link.is_symlink() and str(link.readlink()) == commands.crosstalk[0]
    assert first.files == [str(link)]
    assert "not on your PATH" in first.next
    again = install("path", places, commands, environ_path=f"/usr/bin:{places.bin_dir}")
    assert again.files == [] and "not on your PATH" not in again.next
    assert uninstall("path", places).files == [str(link)]
    assert not link.exists() and not link.is_symlink()


def test_path_refuses_to_replace_someone_elses_file(places: Places, commands: Commands) -> None:
    """An unrelated ~/.local/bin/crosstalk is left alone, and install says so."""
    places.bin_dir.mkdir(parents=True)
    theirs = places.bin_dir / "crosstalk"
    theirs.write_text("#!/bin/sh\necho other\n")
    with pytest.raises(Refused) as caught:
        install("path", places, commands, environ_path="")
    assert caught.value.code == "refused"
    assert theirs.read_text() == "#!/bin/sh\necho other\n"
    assert uninstall("path", places).files == []


def test_path_writes_a_wrapper_when_run_as_python_dash_m(
    places: Places, tmp_path: Path
) -> None:
    """Without a console script, a marked shell wrapper runs ``python -m crosstalk``."""
    fallback = resolve_commands(str(tmp_path / "python3"), which=lambda name: None)
    install("path", places, fallback, environ_path="")
    wrapper = places.bin_dir / "crosstalk"
    assert "-m crosstalk" in wrapper.read_text() and wrapper.stat().st_mode & 0o111
    assert uninstall("path", places).files == [str(wrapper)]


def test_a_symlinked_config_is_written_through_its_link(
    places: Places, commands: Commands, tmp_path: Path
) -> None:
    """A settings file linked from a dotfiles folder stays a link; its target gets our hooks."""
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"theme": "dark"}\n')
    link = places.home / ".qwen" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    install("qwen", places, commands, now=NOW)
    assert link.is_symlink() and link.resolve() == real
    assert json.loads(real.read_text())["theme"] == "dark"
    assert "crosstalk" in json.loads(real.read_text())["mcpServers"]


def test_the_hook_is_installed_as_its_launcher_and_known_as_ours_again() -> None:
    """The installers' hook command is this interpreter running the ``-I -S`` launcher, and a
    later install or uninstall finds it again as ours, for its own client only."""
    hook = resolve_commands().hook
    assert hook == (sys.executable, "-I", "-S", str(LAUNCHER))
    line = shlex.join(hook) + " --client codex Stop"
    assert is_ours(line, "codex") and not is_ours(line, "claude")
    assert not is_ours(f"{sys.executable} -I -S /elsewhere/launch.py --client codex Stop", "codex")
