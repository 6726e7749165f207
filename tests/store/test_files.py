"""Atomic private writes and read-only JSON reads."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from crosstalk.errors import DamagedState
from crosstalk.paths import Home
from crosstalk.store.files import read_json_file, write_private_atomic
from tests.store.helpers import FileSnapshot


def test_write_private_atomic_creates_a_0600_file(tmp_path: Path) -> None:
    """A new file gets exactly the bytes given and mode 0600."""
    target = tmp_path / "config.json"
    write_private_atomic(target, b'{"a": 1}')
    assert target.read_bytes() == b'{"a": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_write_private_atomic_replaces_a_loose_file_with_a_0600_one(tmp_path: Path) -> None:
    """Replacing a world-readable file leaves a 0600 file with the new bytes."""
    target = tmp_path / "config.json"
    target.write_bytes(b"old")
    target.chmod(0o644)
    write_private_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_write_private_atomic_leaves_no_temporary_files(tmp_path: Path) -> None:
    """After several writes the directory holds only the target."""
    target = tmp_path / "identity.json"
    for n in range(3):
        write_private_atomic(target, str(n).encode())
    assert [p.name for p in tmp_path.iterdir()] == ["identity.json"]


def test_failed_write_keeps_the_old_file_and_cleans_up(tmp_path: Path) -> None:
    """A write that fails midway leaves the old contents and no temporary file."""
    target = tmp_path / "identity.json"
    target.write_bytes(b"old")
    with pytest.raises(TypeError):
        write_private_atomic(target, "not bytes")  # type: ignore[arg-type]  # the failure we inject
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["identity.json"]


def test_home_ensure_makes_the_state_directory_0700(tmp_path: Path) -> None:
    """Home.ensure creates the directory 0700 and tightens a looser existing one."""
    home = Home(tmp_path / "fresh")
    home.ensure()
    assert stat.S_IMODE(home.root.stat().st_mode) == 0o700
    loose = Home(tmp_path / "loose")
    loose.root.mkdir(mode=0o755)
    loose.root.chmod(0o755)
    loose.ensure()
    assert stat.S_IMODE(loose.root.stat().st_mode) == 0o700


def test_read_json_file_returns_none_when_missing(tmp_path: Path) -> None:
    """A missing file reads as None, and reading does not create it."""
    assert read_json_file(tmp_path / "nope.json") is None
    assert not (tmp_path / "nope.json").exists()


def test_read_json_file_parses_json(tmp_path: Path) -> None:
    """A JSON file reads as its value."""
    target = tmp_path / "config.json"
    target.write_text('{"relay": "ws://127.0.0.1:1", "n": [1, 2]}')
    assert read_json_file(target) == {"relay": "ws://127.0.0.1:1", "n": [1, 2]}


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"", b"\xff\xfe\x00garbage", b'{"a": 1} trailing'],
    ids=["broken", "empty", "not utf-8", "trailing"],
)
def test_unparsable_json_is_named_and_left_byte_identical(tmp_path: Path, content: bytes) -> None:
    """A file that does not parse raises DamagedState naming it; bytes and mtime are unchanged."""
    target = tmp_path / "config.json"
    target.write_bytes(content)
    before = FileSnapshot.of(target)
    with pytest.raises(DamagedState) as caught:
        read_json_file(target)
    assert "config.json" in caught.value.message
    assert "left untouched" in caught.value.message
    assert caught.value.code == "damaged_state"
    assert FileSnapshot.of(target) == before


def test_unreadable_path_is_damaged_state(tmp_path: Path) -> None:
    """A path that cannot be read as a file (a directory) is reported, naming it."""
    target = tmp_path / "config.json"
    target.mkdir()
    with pytest.raises(DamagedState, match=r"config\.json .*cannot be read"):
        read_json_file(target)
    assert target.is_dir()
