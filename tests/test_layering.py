"""The sans-IO cores stay pure: no I/O, clocks or randomness imported into crosstalk/core/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"trio", "socket", "time", "random", "os", "trio_websocket", "sqlite3", "asyncio"}
PURE_DIRS = [ROOT / "crosstalk" / "core"]


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _core_modules() -> list[Path]:
    return sorted(p for d in PURE_DIRS for p in d.rglob("*.py"))


def test_core_package_exists() -> None:
    """The layering test has something to check."""
    assert _core_modules(), "crosstalk/core/ has no modules"


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: p.name)
def test_core_module_imports_no_io(path: Path) -> None:
    """A core module imports none of trio, socket, time, random, os (nor other I/O)."""
    bad = _imported_top_levels(path) & FORBIDDEN
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_actors_are_not_imported_by_cores() -> None:
    """Import direction is one way: actors -> cores, never back."""
    for path in _core_modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("crosstalk.actors"), path


def test_sim_hooks_is_a_leaf() -> None:
    """``crosstalk/sim_hooks.py`` imports nothing, so every layer (cores too) may call it."""
    path = ROOT / "crosstalk" / "sim_hooks.py"
    assert _imported_top_levels(path) <= {"__future__", "collections"}
