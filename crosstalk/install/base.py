"""What every installer shares: where clients keep their files, which commands to register,
and the one careful way we change a file.

Theory of operation
-------------------
An installer never edits in place. It first *plans*: it reads every file it will touch, parses
each one (a file that does not parse raises :class:`~crosstalk.errors.InvalidConfig` naming it,
before anything is written anywhere), and computes the new text. The plan is a list of
:class:`Edit` (path, text before, text after). Only then does :func:`apply_edits` write, and only
the edits whose text changed: each changed file that existed is first copied to a timestamped
backup beside it (``settings.json.crosstalk-bak-20260101T120000Z``), then replaced atomically
(write a temporary file in the same directory, then rename over), keeping the file's mode.

One backup per file: it holds the text before crosstalk's latest change, and making it removes
the ones before it. A file we remove (it held nothing but ours) keeps no backup at all.

Round trips. Each format edits in place (:mod:`~crosstalk.install.jsondoc` keeps the file's own
indentation and key order, :mod:`~crosstalk.install.yamldoc` keeps comments, anchors and merge
keys, :mod:`~crosstalk.install.tomlblock` touches only its marked block). On top of that,
:func:`settle`: when a planned text means exactly what the backup means (the usual uninstall,
where nothing else changed since the install), the backup's own bytes are written instead, so
uninstall gives back the file byte for byte. :func:`keep_emptied` keeps a section the user had
empty (Hermes's ``hooks: {}``) that removing ours would otherwise prune.

Idempotence follows from planning: installing again computes the same text, so nothing changes,
nothing is written and no second backup appears. Our entries are recognised by their command
(:func:`is_ours`: a ``crosstalk-hook``/``crosstalk hook`` command carrying ``--client NAME``) or by
the name ``crosstalk`` under a client's MCP servers, never by position, so a moved install is
still found and replaced rather than duplicated.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any, cast

import attrs

from crosstalk.errors import InvalidConfig

#: The name under which crosstalk registers itself wherever a client names its MCP servers.
SERVER_NAME = "crosstalk"
#: The hook's fast entry point, which installers name in client configs (run with ``-I -S``).
LAUNCHER = Path(__file__).resolve().parents[1] / "hook" / "launch.py"
BACKUP_TAG = ".crosstalk-bak-"
#: A format's parser for :func:`settle`: text to comparable data, InvalidConfig if it fails.
Parse = Callable[[str], object]


@attrs.frozen
class Places:
    """Where the clients keep their configuration, for one user (tests pass a temporary HOME)."""

    home: Path
    codex_home: Path
    claude_dir: Path
    xdg_config: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Places:
        """Resolve from ``HOME``, ``CODEX_HOME``, ``CLAUDE_CONFIG_DIR`` and ``XDG_CONFIG_HOME``."""
        env = os.environ if environ is None else environ
        home = Path(env.get("HOME") or Path.home()).expanduser()
        return cls(
            home=home,
            codex_home=Path(env.get("CODEX_HOME") or home / ".codex").expanduser(),
            claude_dir=Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude").expanduser(),
            xdg_config=Path(env.get("XDG_CONFIG_HOME") or home / ".config").expanduser(),
        )

    @property
    def claude_json(self) -> Path:
        """Claude Code's user-scope state file, where ``claude mcp add -s user`` writes."""
        if self.claude_dir != self.home / ".claude":
            return self.claude_dir / ".claude.json"
        return self.home / ".claude.json"

    @property
    def bin_dir(self) -> Path:
        return self.home / ".local" / "bin"


@attrs.frozen
class Commands:
    """The argv prefixes that run the installed CLI and hook program, and the MCP server's tool
    profile (``crosstalk server --tools``, already checked: :mod:`crosstalk.mcp.profiles`)."""

    crosstalk: tuple[str, ...]
    hook: tuple[str, ...]
    tools: str = "full"

    @property
    def hook_line(self) -> str:
        """The hook program as one shell-quoted command line (dialects append client and event)."""
        return shlex.join(self.hook)

    @property
    def server_command(self) -> str:
        return self.crosstalk[0]

    @property
    def server_args(self) -> list[str]:
        """``server``, with ``--tools`` unless it serves every tool (the default: an install
        that does not choose writes exactly what it wrote before profiles existed)."""
        profile = [] if self.tools == "full" else ["--tools", self.tools]
        return [*self.crosstalk[1:], "server", *profile]


def resolve_commands(
    python: str | None = None, which: Callable[[str], str | None] = shutil.which
) -> Commands:
    """Absolute command lines of the installed CLI and hook.

    The hook is this interpreter running :data:`LAUNCHER` with ``-I -S`` (no site-packages
    processing at each of the many hook starts; see crosstalk/hook/launch.py). For the CLI, and
    for the hook when another interpreter is named, the scripts beside the interpreter win (they
    are the ones this very install made; a version manager's shim on PATH may point elsewhere
    tomorrow), then PATH, then ``python -m crosstalk``.
    """
    exe = python or sys.executable
    found: dict[str, str | None] = {}
    for name in ("crosstalk", "crosstalk-hook"):
        beside = Path(exe).parent / name
        if beside.is_file() and os.access(beside, os.X_OK):
            found[name] = str(beside)
        else:
            on_path = which(name)
            found[name] = str(Path(on_path).absolute()) if on_path else None
    cli = found["crosstalk"]
    hook = found["crosstalk-hook"]
    cli_argv = (cli,) if cli else (exe, "-m", "crosstalk")
    if python is None and LAUNCHER.is_file():  # this interpreter runs this very package
        hook_argv: tuple[str, ...] = (exe, "-I", "-S", str(LAUNCHER))
    else:
        hook_argv = (hook,) if hook else (*cli_argv, "hook")
    return Commands(crosstalk=cli_argv, hook=hook_argv)


def is_ours(command: object, client: str | None = None) -> bool:
    """Whether a hook command line is one crosstalk installed (for ``client``, if given)."""
    if not isinstance(command, str):
        return False
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    if not argv:
        return False
    program = Path(argv[0]).name
    if program == "crosstalk-hook":
        rest = argv[1:]
    elif argv[1:3] == ["-I", "-S"] and Path(argv[3] if len(argv) > 3 else "").parts[-3:] == (
        "crosstalk", "hook", LAUNCHER.name
    ):
        rest = argv[4:]
    elif program == "crosstalk" and argv[1:2] == ["hook"]:
        rest = argv[2:]
    elif argv[1:4] == ["-m", "crosstalk", "hook"]:
        rest = argv[4:]
    else:
        return False
    if "--client" not in rest:
        return False
    at = rest.index("--client")
    named = rest[at + 1] if at + 1 < len(rest) else None
    return named is not None and (client is None or named == client)


@attrs.frozen
class Edit:
    """One file's planned change: ``after`` None means the file should not exist."""

    path: Path
    before: str | None
    after: str | None

    @property
    def changes(self) -> bool:
        return self.before != self.after


@attrs.frozen
class Outcome:
    """What an install or uninstall did; the CLI prints ``{client, files, backups, next}``."""

    client: str
    files: list[str]
    backups: list[str]
    next: str
    #: For ``mcp``: the generic stdio entry to paste into any MCP client.
    entry: dict[str, object] | None = None


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist.

    Raises:
        InvalidConfig: it exists but is not a readable UTF-8 file.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except (IsADirectoryError, PermissionError) as exc:
        raise InvalidConfig(
            f"{path} cannot be read ({exc.strerror}); it was left untouched."
        ) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidConfig(
            f"{path} is not UTF-8 text, so crosstalk will not edit it; it was left untouched."
        ) from None


def backup_path(path: Path, now: dt.datetime) -> Path:
    """A free name beside ``path`` stamped with ``now`` (UTC)."""
    stamp = now.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}-{n}")
        n += 1
    return candidate


def backups_of(path: Path) -> list[Path]:
    """Crosstalk's backups of ``path``, oldest first (stamps sort by time)."""
    if not path.parent.is_dir():
        return []
    return sorted(path.parent.glob(glob.escape(path.name + BACKUP_TAG) + "*"))


def previous_text(path: Path) -> str | None:
    """The text before crosstalk's latest change to ``path`` (its backup), if there is one."""
    found = backups_of(path)
    if not found:
        return None
    try:
        return read_text(found[-1])
    except InvalidConfig:
        return None


def settle(path: Path, before: str | None, after: str | None, parse: Parse) -> str | None:
    """``after``, or the backup's exact text when that means the same (see the module docstring).

    ``after`` None (the file emptied) becomes the backup's text when the backup itself holds an
    empty document: the user's file was there before we were, so it stays.
    """
    if after == before:
        return after
    earlier = previous_text(path)
    if earlier is None or earlier == after:
        return after
    try:
        same = parse(earlier) == (parse(after) if after is not None else parse(""))
    except InvalidConfig:
        return after
    return earlier if same else after


def keep_emptied(
    old: MutableMapping[str, Any], new: MutableMapping[str, Any], earlier: object
) -> None:
    """Put back into ``new`` the top-level keys it lost whose value was empty in ``old`` (nothing
    of ours was in them) or is empty in ``earlier`` (the parsed backup: the user had it empty
    before we filled it), each at its old position."""
    lost = [key for key in old if key not in new]
    keep = [
        key
        for key in lost
        if _empty(old[key]) or (isinstance(earlier, Mapping) and _empty(earlier.get(key, 1)))
    ]
    for key in keep:
        at = sum(1 for k in list(old)[: list(old).index(key)] if k in new)
        value = old[key] if _empty(old[key]) else cast(Mapping[str, Any], earlier)[key]
        insert = getattr(new, "insert", None)
        if insert is not None:
            insert(at, key, value)
            continue
        items = list(new.items())
        items.insert(at, (key, value))
        new.clear()
        new.update(items)


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, dict | list) and not value)


def _write_atomically(path: Path, text: str) -> None:
    if path.is_symlink():
        # A config kept in a dotfiles repository and linked into place: write through the
        # link, so the link (and the repository) stays as the user made it.
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply_edits(edits: list[Edit], now: dt.datetime) -> tuple[list[str], list[str]]:
    """Write the edits that change something, each after backing up what it replaces.

    Returns:
        (files written or removed, backups made), as strings.
    """
    files: list[str] = []
    backups: list[str] = []
    for edit in edits:
        if not edit.changes:
            continue
        stale = backups_of(edit.path)
        if edit.before is not None and edit.after is not None:
            backup = backup_path(edit.path, now)
            shutil.copy2(edit.path, backup)
            backups.append(str(backup))
        if edit.after is None:
            edit.path.unlink(missing_ok=True)
        else:
            _write_atomically(edit.path, edit.after)
        for old in stale:
            old.unlink(missing_ok=True)
        files.append(str(edit.path))
    return files, backups


@attrs.frozen
class Inspection:
    """What of ours a client's config holds now (for ``crosstalk doctor``)."""

    client: str
    #: Events we register for this client, in order.
    expected: tuple[str, ...]
    #: Event -> our hook command lines found there.
    hooks: dict[str, list[str]]
    mcp: bool
    #: Events whose hook the client has not been told to trust (Codex only; None elsewhere).
    untrusted: tuple[str, ...] | None = None

    @property
    def installed(self) -> bool:
        return bool(self.hooks) or self.mcp

    @property
    def missing(self) -> list[str]:
        return [event for event in self.expected if event not in self.hooks]
