"""Installers edit configs in place, round-trip (issue 20, finding 7).

YAML keeps comments, anchors and merge keys; JSON keeps its own indentation and key order;
duplicate JSON keys are refused; Hermes keeps the user's own ``hooks: {}``; uninstall gives the
file back byte for byte when nothing else changed, removes what it created (empty plugin folders
too) and keeps one backup per file.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.errors import InvalidConfig
from crosstalk.install import MODULES, Commands, Places, install, uninstall
from crosstalk.install.base import BACKUP_TAG
from crosstalk.install.jsondoc import Style, parse_object
from tests.install.conftest import snapshot
from tests.install.seeds import SEEDS, write

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=1)
LATEST = NOW + dt.timedelta(minutes=2)

HERMES_YAML = """\
# Hermes settings, kept by hand
defaults: &defaults
  timeout: 30   # seconds
  retries: 2

model:
  <<: *defaults
  name: "hermes-4"   # quoted on purpose
hooks: {}
toolsets:
    - web      # first
    - terminal
"""

GOOSE_YAML = """\
# my goose
GOOSE_PROVIDER: openai   # the provider
common: &common
  enabled: true
  timeout: 300
extensions:
  developer:
    <<: *common
    type: builtin
    name: developer
"""


def _hermes(places: Places) -> Path:
    return places.home / ".hermes" / "config.yaml"


def _goose(places: Places) -> Path:
    return places.xdg_config / "goose" / "config.yaml"


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("client", "where", "text"),
    [("hermes", _hermes, HERMES_YAML), ("goose", _goose, GOOSE_YAML)],
)
def test_yaml_install_keeps_comments_anchors_merge_keys_and_order(
    client: str, where: object, text: str, places: Places, commands: Commands
) -> None:
    """Every line of the user's YAML survives the install, in order; only ours is added."""
    assert callable(where)
    path: Path = where(places)
    _put(path, text)
    install(client, places, commands, now=NOW)
    new = path.read_text(encoding="utf-8")
    lines = new.splitlines()
    at = 0
    for line in text.splitlines():
        if line == "hooks: {}":
            continue  # Hermes fills it with ours
        assert line in lines[at:], (line, new)
        at = lines.index(line, at) + 1
    assert "<<: *" in new and "&" in new
    assert MODULES[client].inspect(places).mcp


@pytest.mark.parametrize(
    ("client", "where", "text"),
    [("hermes", _hermes, HERMES_YAML), ("goose", _goose, GOOSE_YAML)],
)
def test_yaml_uninstall_gives_back_the_exact_bytes(
    client: str, where: object, text: str, places: Places, commands: Commands
) -> None:
    """Install then uninstall with nothing else changed: the YAML file is byte for byte back."""
    assert callable(where)
    path: Path = where(places)
    _put(path, text)
    install(client, places, commands, now=NOW)
    uninstall(client, places, now=LATER)
    assert path.read_bytes() == text.encode()


def test_hermes_keeps_the_users_own_empty_hooks_when_the_file_changed_since(
    places: Places, commands: Commands
) -> None:
    """``hooks: {}`` was the user's: uninstall empties it of ours but keeps it, even when the user
    has since edited the file (so the exact bytes cannot simply come back)."""
    path = _hermes(places)
    _put(path, HERMES_YAML)
    install("hermes", places, commands, now=NOW)
    path.write_text(path.read_text(encoding="utf-8") + "display: compact\n", encoding="utf-8")
    uninstall("hermes", places, now=LATER)
    new = path.read_text(encoding="utf-8")
    assert "hooks: {}" in new
    assert "display: compact" in new and "# Hermes settings, kept by hand" in new
    assert "crosstalk" not in new


def test_hermes_uninstall_without_ours_leaves_an_empty_hooks_alone(places: Places) -> None:
    """Uninstalling where nothing of ours is present changes nothing, ``hooks: {}`` included."""
    path = _hermes(places)
    _put(path, HERMES_YAML)
    outcome = uninstall("hermes", places, now=NOW)
    assert outcome.files == []
    assert path.read_text(encoding="utf-8") == HERMES_YAML


@pytest.mark.parametrize(
    "text",
    [
        '{\n    "theme": "dark",\n    "zeta": 1,\n    "alpha": {\n        "b": null\n    }\n}\n',
        '{\n\t"theme": "dark",\n\t"zeta": 1\n}',
        '{"theme": "dark", "zeta": 1}',
        '{"theme":"dark","zeta":1}\n',
        '{\r\n  "theme": "dark",\r\n  "zeta": 1\r\n}\r\n',
    ],
)
def test_json_keeps_its_indentation_and_key_order_when_other_content_changed(
    text: str, places: Places, commands: Commands
) -> None:
    """Uninstall after the user also edited the file (so no byte-for-byte restore) writes the
    JSON in the file's own style, keys in their order: never pretty-printed to two spaces."""
    path = places.claude_dir / "settings.json"
    _put(path, text)
    install("claude", places, commands, now=NOW)
    data = json.loads(path.read_text(encoding="utf-8"))
    data["theme"] = "light"
    path.write_text(Style.of(text).dump(data), encoding="utf-8")
    uninstall("claude", places, now=LATER)
    assert path.read_bytes() == text.replace('"dark"', '"light"').encode()


def test_json_with_a_duplicate_key_is_invalid_config_and_untouched(
    places: Places, commands: Commands
) -> None:
    """Duplicate keys are refused in one sentence, not silently reduced to the last one."""
    path = places.claude_dir / "settings.json"
    text = '{"theme": "dark", "theme": "light"}\n'
    _put(path, text)
    before = snapshot(places.home)
    with pytest.raises(InvalidConfig) as caught:
        install("claude", places, commands, now=NOW)
    assert caught.value.code == "invalid_config"
    assert str(path) in caught.value.message and "`theme` twice" in caught.value.message
    assert caught.value.message.count(". ") == 0  # one sentence
    assert snapshot(places.home) == before
    with pytest.raises(InvalidConfig):
        uninstall("claude", places, now=NOW)
    assert snapshot(places.home) == before


def test_nested_duplicate_keys_are_found_too(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig):
        parse_object(tmp_path / "x.json", '{"hooks": {"Stop": [], "Stop": []}}')


@pytest.mark.parametrize("client", list(MODULES))
def test_uninstall_restores_every_file_byte_for_byte(
    client: str, places: Places, commands: Commands
) -> None:
    """With nothing else changed since the install, every seeded file comes back exactly; the
    only other thing left is one backup per changed file."""
    seed = {path: _oddly_formatted(path, text) for path, text in SEEDS[client](places).items()}
    write(seed)
    install(client, places, commands, now=NOW)
    uninstall(client, places, now=LATER)
    for path, text in seed.items():
        assert path.read_bytes() == text.encode(), path
    left = {k for k in snapshot(places.home) if BACKUP_TAG not in k}
    assert left == {str(p.relative_to(places.home)) for p in seed}


def _oddly_formatted(path: Path, text: str) -> str:
    """The seed as a person might have left it: JSON with tabs and no final newline, TOML with
    no final newline."""
    if path.suffix == ".json":
        return json.dumps(json.loads(text), indent="\t")
    if path.suffix == ".toml":
        return text.rstrip("\n")
    return text


@pytest.mark.parametrize("client", list(MODULES))
def test_repeated_install_uninstall_keeps_one_backup_per_file(
    client: str, places: Places, commands: Commands
) -> None:
    """However many times one installs and uninstalls, each file has at most one backup."""
    write(SEEDS[client](places))
    for minute in range(3):
        install(client, places, commands, now=NOW + dt.timedelta(minutes=2 * minute))
        uninstall(client, places, now=NOW + dt.timedelta(minutes=2 * minute + 1))
    names = [k for k in snapshot(places.home) if BACKUP_TAG in k]
    owners = [k.split(BACKUP_TAG)[0] for k in names]
    assert len(owners) == len(set(owners)), names


def test_goose_uninstall_removes_the_plugin_folders_it_created(
    places: Places, commands: Commands
) -> None:
    """No empty ``~/.agents/plugins/crosstalk/hooks`` (or its parents) is left behind."""
    install("goose", places, commands, now=NOW)
    assert (places.home / ".agents" / "plugins" / "crosstalk" / "hooks").is_dir()
    uninstall("goose", places, now=LATER)
    assert not (places.home / ".agents").exists()


def test_goose_uninstall_keeps_plugin_folders_that_hold_others(
    places: Places, commands: Commands
) -> None:
    other = places.home / ".agents" / "plugins" / "other" / "plugin.json"
    _put(other, "{}\n")
    install("goose", places, commands, now=NOW)
    uninstall("goose", places, now=LATER)
    assert other.read_text() == "{}\n"
    assert not (places.home / ".agents" / "plugins" / "crosstalk").exists()


def test_a_users_empty_json_file_stays(places: Places, commands: Commands) -> None:
    """A file the user had (even ``{}``) is not removed on uninstall; only files we created are."""
    path = places.claude_json
    _put(path, "{}\n")
    install("claude", places, commands, now=NOW)
    uninstall("claude", places, now=LATER)
    assert path.read_text(encoding="utf-8") == "{}\n"


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
_INDENT = st.one_of(st.none(), st.integers(min_value=0, max_value=8), st.just("\t"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=st.dictionaries(st.text(max_size=6), _JSON, max_size=5),
    indent=_INDENT,
    final=st.booleans(),
    compact=st.booleans(),
    client=st.sampled_from(["claude", "qwen", "gemini", "cursor"]),
)
def test_random_json_install_then_uninstall_is_identical_bytes(
    doc: dict[str, object], indent: int | str | None, final: bool, compact: bool, client: str
) -> None:
    """Any JSON object in any indentation: install then uninstall gives back identical bytes,
    and (with the backup gone, so no restore) the file's own style still reproduces it."""
    separators = (",", ":") if compact else None
    text = json.dumps(doc, indent=indent, separators=separators, ensure_ascii=False)
    text += "\n" if final else ""
    home = Path(tempfile.mkdtemp())
    try:
        places = Places.from_env({"HOME": str(home)})
        commands = Commands(crosstalk=("/opt/crosstalk",), hook=("/opt/crosstalk-hook",))
        target = {
            "claude": places.claude_json,
            "qwen": home / ".qwen" / "settings.json",
            "gemini": home / ".gemini" / "settings.json",
            "cursor": home / ".cursor" / "mcp.json",
        }[client]
        _put(target, text)
        install(client, places, commands, now=NOW)
        uninstall(client, places, now=LATER)
        assert target.read_bytes() == text.encode()
        if doc:
            assert Style.of(text).dump(json.loads(text)) == text
    finally:
        shutil.rmtree(home)
