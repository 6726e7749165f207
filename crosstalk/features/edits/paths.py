"""Where the files a hook names are: their repository and repository-relative path.

Blocking (``realpath`` and ``stat`` calls, reading ``.crosstalk/project.json``): the shell runs
:func:`resolve` on a worker thread. A path is taken as the client gave it: absolute, or relative
to the session's ``cwd`` (an absolute directory; without one a relative path names nothing).
Symlinks and ``..`` are resolved first (``os.path.realpath``), so a link into another
repository counts as that repository's file and a path that leaves every repository is dropped.
Never reads a file's contents; never passes a path to another program, so a name that looks
like an option is just a name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from crosstalk.core.edits import valid_repo_path
from crosstalk.errors import InvalidConfig
from crosstalk.project import bound_room, repo_root

MAX_INPUT_PATHS = 256
MAX_INPUT_LENGTH = 4096


@attrs.frozen
class RepoFile:
    """A file inside a repository: the repository's bare name and its POSIX relative path."""

    repo: str
    path: str


@attrs.frozen
class Resolved:
    """What :func:`resolve` found: the files, and each repository's bound room (or None)."""

    files: tuple[RepoFile, ...]
    bound: dict[str, str | None]  # repository name -> room id its project.json names


def _absolute(raw: str, cwd: str | None) -> str | None:
    if not raw or len(raw) > MAX_INPUT_LENGTH or "\0" in raw:
        return None
    if os.path.isabs(raw):
        return raw
    if cwd is None or not os.path.isabs(cwd) or "\0" in cwd or len(cwd) > MAX_INPUT_LENGTH:
        return None
    return os.path.join(cwd, raw)


def _in_repo(path: str, roots: dict[str, Path | None]) -> tuple[Path, str] | None:
    """``(root, relative path)`` of ``path`` (already real), or None outside every repository."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    parent = os.path.dirname(real)
    if parent not in roots:
        roots[parent] = repo_root(parent)
    root = roots[parent]
    if root is None:
        return None
    relative = PurePosixPath(Path(real).relative_to(root).as_posix())
    if relative.parts[:1] == (".git",):  # git's own files are not anyone's edits
        return None
    text = str(relative)
    return (root, text) if valid_repo_path(text) else None


def resolve(cwd: str | None, paths: Sequence[str]) -> Resolved:
    """The repository files among ``paths`` (see the module docstring), each once, in order;
    at most :data:`MAX_INPUT_PATHS` are looked at."""
    roots: dict[str, Path | None] = {}
    files: dict[RepoFile, None] = {}
    found_roots: dict[str, Path] = {}
    for raw in paths[:MAX_INPUT_PATHS]:
        absolute = _absolute(raw, cwd) if isinstance(raw, str) else None
        found = None if absolute is None else _in_repo(absolute, roots)
        if found is None:
            continue
        root, relative = found
        files[RepoFile(root.name, relative)] = None
        found_roots.setdefault(root.name, root)
    bound: dict[str, str | None] = {}
    for name, root in found_roots.items():
        try:
            bound[name] = bound_room(root)
        except InvalidConfig:  # a damaged project.json binds nothing; other commands say so
            bound[name] = None
    return Resolved(tuple(files), bound)
