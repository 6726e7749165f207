"""Fixtures for installer tests: a temporary HOME per test, and the installed commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstalk.install import Commands, Places, resolve_commands


@pytest.fixture
def places(tmp_path: Path) -> Places:
    home = tmp_path / "home"
    home.mkdir()
    return Places.from_env({"HOME": str(home)})


@pytest.fixture
def commands() -> Commands:
    return resolve_commands()


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (symlinks as their target path), by relative path."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            files[rel] = str(path.readlink()).encode()
        elif path.is_file():
            files[rel] = path.read_bytes()
    return files
