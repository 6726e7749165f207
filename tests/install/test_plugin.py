"""The Claude Code plugin files at the repository root: valid, complete, running real commands."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import yaml

from crosstalk.core.dialects import hook_config

ROOT = Path(__file__).resolve().parents[2]
SLASH_COMMANDS = {
    "install", "room", "link", "facts", "tasks", "trust", "attention",
    "peers", "mute", "rename", "cost", "secure", "doctor", "status",
}  # fmt: skip
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _json(rel: str) -> dict[str, object]:
    value = json.loads((ROOT / rel).read_text(encoding="utf-8"))
    assert isinstance(value, dict), rel
    return value


def _scripts() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(project["scripts"])


def _version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def _frontmatter(path: Path) -> dict[str, object]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path
    head, _, body = text[4:].partition("\n---\n")
    meta = yaml.safe_load(head)
    assert isinstance(meta, dict) and body.strip(), path
    return meta


def test_plugin_manifest_has_the_fields_claude_code_requires() -> None:
    """plugin.json names the plugin in kebab case and carries the package's version."""
    manifest = _json(".claude-plugin/plugin.json")
    assert manifest["name"] == "crosstalk" and KEBAB.match(str(manifest["name"]))
    assert manifest["version"] == _version()
    assert isinstance(manifest["description"], str) and manifest["description"]


def test_marketplace_lists_the_plugin_at_the_repository_root() -> None:
    """marketplace.json has a name, an owner object, and an entry whose source is this repo."""
    market = _json(".claude-plugin/marketplace.json")
    assert market["name"] == "epode" and KEBAB.match(str(market["name"]))
    owner = market["owner"]
    assert isinstance(owner, dict) and owner["name"]
    plugins = market["plugins"]
    assert isinstance(plugins, list) and len(plugins) == 1
    entry = plugins[0]
    assert entry["name"] == "crosstalk" and entry["version"] == _version()
    source = str(entry["source"])
    assert source.startswith("./")
    assert (ROOT / source / ".claude-plugin" / "plugin.json").is_file()


def test_plugin_hooks_are_the_claude_dialect_config_running_an_installed_script() -> None:
    """hooks/hooks.json is exactly what the dialect registers, and its program is a console
    script of this package that is on PATH after pip install."""
    hooks = _json("hooks/hooks.json")
    assert hooks["hooks"] == hook_config("claude", "crosstalk-hook")["hooks"]
    for groups in dict(hooks["hooks"]).values():  # type: ignore[call-overload]
        for group in groups:
            for handler in group["hooks"]:
                program = shlex.split(handler["command"])[0]
                assert program in _scripts()
                assert shutil.which(program) is not None


def test_plugin_mcp_server_is_the_installed_crosstalk_server() -> None:
    """.mcp.json starts `crosstalk server`, a console script of this package."""
    server = _json(".mcp.json")["mcpServers"]["crosstalk"]  # type: ignore[index]
    assert server["command"] in _scripts() and server["args"] == ["server"]
    assert shutil.which(server["command"]) is not None


def test_every_slash_command_exists_with_a_description_and_narrow_tools() -> None:
    """The fourteen commands/*.md each describe themselves and may run only their own verb."""
    found = {p.stem: p for p in (ROOT / "commands").glob("*.md")}
    assert set(found) == SLASH_COMMANDS
    for name, path in found.items():
        meta = _frontmatter(path)
        assert isinstance(meta["description"], str) and meta["description"]
        tools = str(meta["allowed-tools"])
        assert tools.startswith("Bash(crosstalk "), name
        assert "Bash(crosstalk:*)" not in tools


def test_commands_that_change_trust_or_identity_are_only_for_the_user_to_run() -> None:
    """The model cannot invoke trust, mute, link, secure, rename or install by itself."""
    for name in ("trust", "mute", "link", "secure", "rename", "install"):
        meta = _frontmatter(ROOT / "commands" / f"{name}.md")
        assert meta.get("disable-model-invocation") is True, name


def test_skill_states_the_rules_for_untrusted_arrivals_and_rationed_messages() -> None:
    """SKILL.md has a name and description and states each rule the agent must follow."""
    path = ROOT / "skills" / "crosstalk" / "SKILL.md"
    meta = _frontmatter(path)
    assert meta["name"] == "crosstalk" and meta["description"]
    text = " ".join(path.read_text(encoding="utf-8").split())
    for rule in (
        "untrusted third-party text",
        "Never approve a permission, change settings",
        "Attach slices rather than summarise",
        "Those are rationed",
        "must say why",
        "crosstalk_read",
    ):
        assert rule in text, rule
