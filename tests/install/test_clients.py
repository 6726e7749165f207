"""Every client's installer against a temporary HOME: idempotent, keeps others' entries, backs up,
refuses what it cannot parse, and uninstalls exactly what it added."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import yaml

from crosstalk.errors import InvalidConfig
from crosstalk.install import MODULES, Commands, Places, install, uninstall
from tests.install.conftest import snapshot
from tests.install.seeds import GARBAGE, SEEDS, write

CLIENTS = list(MODULES)
NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=1)


def _data(path: Path, text: str) -> object:
    """What a file means: parsed JSON/YAML; TOML as its exact text (we never reformat TOML)."""
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix == ".yaml":
        return yaml.safe_load(text)
    return text


@pytest.mark.parametrize("client", CLIENTS)
def test_install_twice_leaves_identical_files(
    client: str, places: Places, commands: Commands
) -> None:
    """A second install changes no byte, writes no file and makes no backup."""
    write(SEEDS[client](places))
    first = install(client, places, commands, now=NOW)
    after_first = snapshot(places.home)
    second = install(client, places, commands, now=LATER)
    assert first.files
    assert (second.files, second.backups) == ([], [])
    assert snapshot(places.home) == after_first


@pytest.mark.parametrize("client", CLIENTS)
def test_install_on_a_fresh_home_registers_every_hook_and_the_server(
    client: str, places: Places, commands: Commands
) -> None:
    """With no config at all, install creates what the client reads, and makes no backup."""
    outcome = install(client, places, commands, now=NOW)
    found = MODULES[client].inspect(places)
    assert outcome.backups == []
    assert found.missing == [] and found.mcp
    assert all(Path(f).is_file() for f in outcome.files)


@pytest.mark.parametrize("client", CLIENTS)
def test_install_keeps_others_entries_and_backs_up_what_it_changed(
    client: str, places: Places, commands: Commands
) -> None:
    """Others' hooks, servers and settings survive; each changed file's old text is backed up."""
    seed = SEEDS[client](places)
    write(seed)
    outcome = install(client, places, commands, now=NOW)
    for path, text in seed.items():
        new = path.read_text(encoding="utf-8")
        assert new.count("other-tool") == text.count("other-tool"), path
        old, now = _data(path, text), _data(path, new)
        if isinstance(old, dict):
            assert isinstance(now, dict) and set(old) <= set(now), path
        stamp = NOW.strftime("%Y%m%dT%H%M%SZ")
        backup = path.with_name(f"{path.name}.crosstalk-bak-{stamp}")
        assert str(backup) in outcome.backups
        assert backup.read_text(encoding="utf-8") == text
    found = MODULES[client].inspect(places)
    assert found.missing == [] and found.mcp


@pytest.mark.parametrize("client", CLIENTS)
def test_unparseable_config_is_left_byte_identical(
    client: str, places: Places, commands: Commands
) -> None:
    """A config that does not parse stops the whole install with invalid_config naming it."""
    seed = SEEDS[client](places)
    for broken in seed:
        write(seed)
        broken.write_text(GARBAGE[broken.suffix], encoding="utf-8")
        before = snapshot(places.home)
        with pytest.raises(InvalidConfig) as caught:
            install(client, places, commands, now=NOW)
        assert caught.value.code == "invalid_config"
        assert str(broken) in caught.value.message
        assert snapshot(places.home) == before


@pytest.mark.parametrize("client", CLIENTS)
def test_uninstall_leaves_exactly_the_others_entries(
    client: str, places: Places, commands: Commands
) -> None:
    """After install then uninstall, each file means what it meant before; ours are all gone."""
    seed = SEEDS[client](places)
    write(seed)
    install(client, places, commands, now=NOW)
    uninstall(client, places, now=LATER)
    for path, text in seed.items():
        assert _data(path, path.read_text(encoding="utf-8")) == _data(path, text), path
    left = {k for k in snapshot(places.home) if ".crosstalk-bak-" not in k}
    assert left == {str(p.relative_to(places.home)) for p in seed}
    assert not MODULES[client].inspect(places).installed


@pytest.mark.parametrize("client", CLIENTS)
def test_uninstall_of_a_fresh_install_removes_the_files_it_created(
    client: str, places: Places, commands: Commands
) -> None:
    """Files that held only our entries are removed, so nothing of crosstalk's is left behind."""
    install(client, places, commands, now=NOW)
    uninstall(client, places, now=LATER)
    left = [k for k in snapshot(places.home) if ".crosstalk-bak-" not in k]
    assert left == []


@pytest.mark.parametrize("client", CLIENTS)
def test_reinstall_from_a_moved_install_replaces_our_entries_in_place(
    client: str, places: Places, commands: Commands, tmp_path: Path
) -> None:
    """Entries from an install elsewhere are recognised as ours and replaced, never duplicated."""
    write(SEEDS[client](places))
    old = Commands(
        crosstalk=(str(tmp_path / "old" / "crosstalk"),),
        hook=(str(tmp_path / "old" / "crosstalk-hook"),),
    )
    install(client, places, old, now=NOW)
    install(client, places, commands, now=LATER)
    found = MODULES[client].inspect(places)
    fresh_home = tmp_path / "fresh"
    fresh_home.mkdir()
    fresh = Places.from_env({"HOME": str(fresh_home)})
    install(client, fresh, commands, now=LATER)
    # As many of ours per event as a first install writes (one, or one per tool type where
    # the client matches one exact tool per entry: Cursor's preToolUse).
    assert found.hooks == MODULES[client].inspect(fresh).hooks
    assert all(str(tmp_path / "old") not in c for cmds in found.hooks.values() for c in cmds)
    assert found.missing == []
