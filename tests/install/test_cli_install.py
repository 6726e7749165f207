"""`crosstalk install` / `uninstall` as a real process: the JSON contract and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def crosstalk(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "crosstalk", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_install_and_uninstall_print_client_files_backups_next(tmp_path: Path) -> None:
    """install --json reports what it wrote and the human step; uninstall reverts, removing the
    files it created without keeping backups of them (they held nothing but ours)."""
    done = crosstalk(tmp_path, "install", "codex", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"client", "files", "backups", "next"}
    assert result["client"] == "codex" and result["backups"] == []
    assert sorted(result["files"]) == sorted(
        [str(tmp_path / ".codex" / "hooks.json"), str(tmp_path / ".codex" / "config.toml")]
    )
    assert "/hooks" in result["next"]
    gone = json.loads(crosstalk(tmp_path, "uninstall", "codex", "--json").stdout)
    assert gone["backups"] == []
    assert not (tmp_path / ".codex" / "hooks.json").exists()
    assert not list((tmp_path / ".codex").glob("*.crosstalk-bak-*"))


def test_install_refuses_an_unparseable_config_with_invalid_config(tmp_path: Path) -> None:
    """Exit 1, code invalid_config, the file named, and its bytes unchanged."""
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"mcpServers": ')
    done = crosstalk(tmp_path, "install", "gemini", "--json")
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "invalid_config" and str(settings) in error["message"]
    assert settings.read_bytes() == b'{"mcpServers": '


def test_install_mcp_prints_the_generic_entry(tmp_path: Path) -> None:
    """`install mcp --json` adds the stdio entry to the usual fields."""
    result = json.loads(crosstalk(tmp_path, "install", "mcp", "--json").stdout)
    assert result["client"] == "mcp" and result["entry"]["args"][-1] == "server"


def test_unknown_client_is_a_usage_error(tmp_path: Path) -> None:
    """An unknown client exits 2 and lists the ones crosstalk knows."""
    done = crosstalk(tmp_path, "install", "notepad", "--json")
    assert done.returncode == 2
    assert "goose" in json.loads(done.stdout)["error"]["message"]
