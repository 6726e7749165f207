"""Each client's config as someone else left it: other tools' hooks and MCP servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from crosstalk.install import Places

OTHER_SERVER = {"command": "other-tool", "args": ["mcp"]}


def _claude_hooks() -> dict[str, object]:
    return {
        "SessionStart": [{"hooks": [{"type": "command", "command": "other-tool start"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "other-tool guard"}]}
        ],
    }


def _json(data: object) -> str:
    return json.dumps(data, indent=4) + "\n"


def claude(p: Places) -> dict[Path, str]:
    return {
        p.claude_dir / "settings.json": _json({"theme": "dark", "hooks": _claude_hooks()}),
        p.claude_json: _json({"numStartups": 3, "mcpServers": {"other": OTHER_SERVER}}),
    }


def codex(p: Places) -> dict[Path, str]:
    return {
        p.codex_home / "hooks.json": _json({"hooks": _claude_hooks()}),
        p.codex_home / "config.toml": (
            '# my codex settings\nmodel = "o5"  # keep\n\n'
            '[mcp_servers.other]\ncommand = "other-tool"\nargs = ["mcp"]\n'
        ),
    }


def cursor(p: Places) -> dict[Path, str]:
    hooks = {"postToolUse": [{"type": "command", "command": "other-tool post"}]}
    return {
        p.home / ".cursor" / "hooks.json": _json({"version": 1, "hooks": hooks}),
        p.home / ".cursor" / "mcp.json": _json({"mcpServers": {"other": OTHER_SERVER}}),
    }


def qwen(p: Places) -> dict[Path, str]:
    data = {"ui": {"theme": "x"}, "hooks": _claude_hooks(), "mcpServers": {"other": OTHER_SERVER}}
    return {p.home / ".qwen" / "settings.json": _json(data)}


def gemini(p: Places) -> dict[Path, str]:
    data = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "hooks": {"BeforeAgent": [{"hooks": [{"type": "command", "command": "other-tool ba"}]}]},
        "mcpServers": {"other": OTHER_SERVER},
    }
    return {p.home / ".gemini" / "settings.json": _json(data)}


def agy(p: Places) -> dict[Path, str]:
    other = {"PreInvocation": [{"type": "command", "command": "other-tool pre", "timeout": 5}]}
    base = p.home / ".gemini" / "config"
    return {
        base / "hooks.json": _json({"other-hook": other}),
        base / "mcp_config.json": _json({"mcpServers": {"other": OTHER_SERVER}}),
    }


def kimi(p: Places) -> dict[Path, str]:
    return {
        p.home / ".kimi-code" / "config.toml": (
            'default_model = "kimi"\n\n'
            '[[hooks]]\nevent = "Stop"\ncommand = "other-tool stop"\ntimeout = 5\n'
        ),
        p.home / ".kimi-code" / "mcp.json": _json({"mcpServers": {"other": OTHER_SERVER}}),
    }


def hermes(p: Places) -> dict[Path, str]:
    return {
        p.home / ".hermes" / "config.yaml": (
            "model: hermes-4\n"
            "hooks:\n  pre_llm_call:\n  - command: other-tool pre\n    timeout: 5\n"
            "mcp_servers:\n  other:\n    command: other-tool\n    args: [mcp]\n"
        ),
    }


def goose(p: Places) -> dict[Path, str]:
    return {
        p.xdg_config / "goose" / "config.yaml": (
            "GOOSE_PROVIDER: openai\n"
            "extensions:\n  developer:\n    enabled: true\n    type: builtin\n"
            "    name: developer\n    cmd: other-tool\n"
        ),
    }


SEEDS: dict[str, Callable[[Places], dict[Path, str]]] = {
    "claude": claude,
    "codex": codex,
    "cursor": cursor,
    "qwen": qwen,
    "gemini": gemini,
    "agy": agy,
    "kimi": kimi,
    "hermes": hermes,
    "goose": goose,
}

GARBAGE = {
    ".json": '{"hooks": [unclosed\n',
    ".toml": "model = \n[[broken\n",
    ".yaml": "model: [unclosed\n  - : {\n",
}


def write(seed: dict[Path, str]) -> None:
    for path, text in seed.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
