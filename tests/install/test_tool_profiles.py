"""`crosstalk install CLIENT --tools SPEC` writes the profile into the client's MCP server entry,
and uninstall still gives every file back byte for byte."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from crosstalk.install import MODULES, Commands, Places, install, uninstall
from tests.install.conftest import snapshot
from tests.install.seeds import SEEDS, write

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=1)


def _json_server(where: Callable[[Places], Path], key: str = "mcpServers") -> Any:
    return lambda p: json.loads(where(p).read_text(encoding="utf-8"))[key]["crosstalk"]


#: client -> its MCP server entry for crosstalk, read back from the file install wrote.
ENTRIES: dict[str, Callable[[Places], Any]] = {
    "claude": _json_server(lambda p: p.claude_json),
    "codex": lambda p: tomllib.loads((p.codex_home / "config.toml").read_text())[
        "mcp_servers"]["crosstalk"],
    "cursor": _json_server(lambda p: p.home / ".cursor" / "mcp.json"),
    "qwen": _json_server(lambda p: p.home / ".qwen" / "settings.json"),
    "gemini": _json_server(lambda p: p.home / ".gemini" / "settings.json"),
    "agy": _json_server(lambda p: p.home / ".gemini" / "config" / "mcp_config.json"),
    "kimi": _json_server(lambda p: p.home / ".kimi-code" / "mcp.json"),
    "hermes": lambda p: yaml.safe_load((p.home / ".hermes" / "config.yaml").read_text())[
        "mcp_servers"]["crosstalk"],
    "goose": lambda p: yaml.safe_load((p.xdg_config / "goose" / "config.yaml").read_text())[
        "extensions"]["crosstalk"],
}


def test_every_client_is_covered() -> None:
    """A client added later gets a row here, or this fails."""
    assert set(ENTRIES) == set(MODULES)


@pytest.mark.parametrize("client", sorted(MODULES))
def test_install_writes_the_profile_and_uninstall_restores_every_byte(
    client: str, places: Places, commands: Commands
) -> None:
    """The entry's args end in ``server --tools core``; after uninstall every seeded file holds
    its exact bytes again."""
    write(SEEDS[client](places))
    before = snapshot(places.home)
    install(client, places, attrs.evolve(commands, tools="core"), now=NOW)
    assert ENTRIES[client](places)["args"][-3:] == ["server", "--tools", "core"]
    uninstall(client, places, now=LATER)
    after = {k: v for k, v in snapshot(places.home).items() if ".crosstalk-bak-" not in k}
    assert after == before


@pytest.mark.parametrize("client", ["claude", "codex", "gemini"])
def test_full_writes_no_flag_and_a_new_profile_replaces_the_old(
    client: str, places: Places, commands: Commands
) -> None:
    """The default writes ``server`` alone (as before profiles); installing again with another
    profile changes the entry in place, once."""
    write(SEEDS[client](places))
    install(client, places, commands, now=NOW)
    assert ENTRIES[client](places)["args"][-1] == "server"
    chosen = "crosstalk_send,crosstalk_read"
    install(client, places, attrs.evolve(commands, tools=chosen), now=LATER)
    assert ENTRIES[client](places)["args"][-3:] == ["server", "--tools", chosen]
    assert MODULES[client].inspect(places).mcp


def _crosstalk(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "crosstalk", *args],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )


def test_cli_install_writes_the_normalised_profile(tmp_path: Path) -> None:
    """Short names become full ones, profiles stay by name, duplicates go."""
    done = _crosstalk(tmp_path, "install", "gemini", "--tools", "core, ask,crosstalk_ask", "--json")
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    args = settings["mcpServers"]["crosstalk"]["args"]
    assert args[-3:] == ["server", "--tools", "core,crosstalk_ask"]
    entry = json.loads(_crosstalk(tmp_path, "install", "mcp", "--tools", "core", "--json").stdout)
    assert entry["entry"]["args"][-3:] == ["server", "--tools", "core"]


def test_cli_install_refuses_an_unknown_tool_and_writes_nothing(tmp_path: Path) -> None:
    """Exit 2, code usage, the unknown name and the valid ones in the message, no file."""
    done = _crosstalk(tmp_path, "install", "claude", "--tools", "core,crosstalk_teleport", "--json")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "usage"
    assert "'crosstalk_teleport'" in error["message"] and "crosstalk_send" in error["message"]
    assert list(tmp_path.iterdir()) == []
