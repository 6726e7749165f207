"""The relay's core modules stay sans-IO: no sockets, clocks, randomness, files or trio."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RELAY = Path(__file__).resolve().parents[2] / "relay"
PURE = ["core.py", "conn.py", "members.py", "rooms.py", "room_state.py", "slots.py", "limits.py",
        "effects.py", "crowd.py", "work.py",
        "storage.py", "metrics.py",
        "replica.py", "nats_layout.py", "nats_wire.py"]
FORBIDDEN = {"trio", "trio_websocket", "socket", "time", "random", "os", "sqlite3", "asyncio",
             "relay.server", "relay.sqlite_store", "relay.main", "relay.keys", "relay.http"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update({alias.name, alias.name.split(".")[0]})
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update({node.module, node.module.split(".")[0]})
    return names


@pytest.mark.parametrize("name", PURE)
def test_relay_core_module_imports_no_io(name: str) -> None:
    """Each pure relay module imports nothing that does I/O or reads the clock."""
    assert not _imports(RELAY / name) & FORBIDDEN
