"""The commit guard's git pre-commit hook: put it in a hooks directory, take it out byte for byte.

A repository may already have a pre-commit hook (a shell script, a Python script, a binary, a
symlink into a hook manager). We never edit or replace it: ``install`` renames it, unchanged, to
``pre-commit.crosstalk-original`` beside ours (a rename keeps its bytes, mode and, for a symlink,
the link itself), and our hook runs it first, with the same arguments, stdin and environment,
stopping the commit with its exit status when it fails. ``uninstall`` renames it back over ours.
Git ignores a hook that is not executable; ours skips such an original the same way.

Our hook is recognised by :data:`MARKER` in a regular file, so installing twice is a no-op (the
hook is rewritten only if its text changed, e.g. crosstalk moved), and a hook that is not ours is
never taken for ours. States and what each call does:

======================  =====================================  ==================================
pre-commit / saved      install                                uninstall
======================  =====================================  ==================================
none / none             write ours                             nothing to do (``removed`` false)
theirs / none           save theirs, write ours                nothing to do (``removed`` false)
ours / none             refresh ours (``already``)             delete ours
ours / saved            refresh ours (``already``)             saved back over ours
none / saved            write ours (an install cut short, or   saved back in place
                        ours deleted: it chains again)
theirs / saved          :class:`HookChanged`, nothing written  :class:`HookChanged`, nothing
======================  =====================================  ==================================

The last row is someone replacing our hook after install: we would otherwise have to drop one of
two hooks that are not ours to drop, so the person chooses.

Writes are atomic (a temporary file in the same directory, then ``os.replace``), and install
writes ours before moving theirs, so an interrupted install leaves either nothing changed or the
"none / saved" row, which the next install or uninstall completes.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from crosstalk.errors import CrosstalkError

HOOK_NAME = "pre-commit"
SAVED_NAME = "pre-commit.crosstalk-original"
MARKER = "# crosstalk-commit-guard v1"
#: How much of a hook file is read to tell whether it is ours (the marker is on line 2).
_PEEK = 4096


class HookChanged(CrosstalkError):
    """The pre-commit hook was replaced after ``crosstalk guard install``, while the hook it
    saved is still kept beside it: crosstalk will not drop either of them."""

    code = "hook_changed"


@attrs.frozen
class Installed:
    """What ``install`` did: the hook's path, the original it chains to, and whether it was
    there already."""

    hook: Path
    chained: Path | None
    already: bool


@attrs.frozen
class Uninstalled:
    """What ``uninstall`` did: ``removed`` our hook (False: it was not installed), ``restored``
    the original in its place."""

    hook: Path
    removed: bool
    restored: bool


def hook_script(command: Sequence[str], home: Path) -> str:
    """The pre-commit hook's text (POSIX sh).

    Args:
        command: the argv that runs crosstalk, absolute (``resolve_commands().crosstalk``);
            when its program is gone, the hook falls back to ``crosstalk`` on PATH.
        home: the state directory to check as, unless ``CROSSTALK_HOME`` is set at commit time.
    """
    program = shlex.quote(command[0])
    recorded = shlex.join([*command, "guard", "check"])
    return f"""#!/bin/sh
{MARKER}
# The crosstalk commit guard: refuses a commit touching paths someone else has reserved.
# Written by `crosstalk guard install`; `crosstalk guard uninstall` takes it out and puts back
# the hook that was here before (kept beside this file as {SAVED_NAME}).
# Commit once without the check: CROSSTALK_GUARD=off git commit ...

original="$(dirname -- "$0")/{SAVED_NAME}"
if [ -f "$original" ] && [ -x "$original" ]; then
    "$original" "$@" || exit $?
fi

say() {{ echo "crosstalk guard: $*" >&2; }}
case "${{CROSSTALK_GUARD:-}}" in
    [Oo][Ff][Ff] | 0 | [Ff][Aa][Ll][Ss][Ee] | [Nn][Oo])
        say "off for this commit (CROSSTALK_GUARD=off); reservations not checked."
        exit 0 ;;
esac

recorded_home={shlex.quote(str(home))}
CROSSTALK_HOME="${{CROSSTALK_HOME:-$recorded_home}}"
export CROSSTALK_HOME
if [ -x {program} ]; then
    exec {recorded}
elif command -v crosstalk >/dev/null 2>&1; then
    exec crosstalk guard check
fi
say "could not check reservations (crosstalk is not installed here any more);" \\
    "committing without the check. 'crosstalk guard uninstall' removes this hook."
exit 0
"""


def is_ours(path: Path) -> bool:
    """Whether ``path`` is a regular file holding our hook (a symlink never is)."""
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as handle:
        head = handle.read(_PEEK)
    return MARKER.encode() in head.split(b"\n")[:3]


def install(hooks_dir: Path, command: Sequence[str], home: Path) -> Installed:
    """Put our pre-commit hook in ``hooks_dir`` (created if missing), chaining to the one there.

    Raises:
        HookChanged: a hook that is not ours is in place and one saved earlier is still kept.
    """
    hook, saved = hooks_dir / HOOK_NAME, hooks_dir / SAVED_NAME
    text = hook_script(command, home).encode()
    if is_ours(hook):
        if hook.read_bytes() != text:
            _write_executable(hook, text)
        return Installed(hook, saved if _exists(saved) else None, already=True)
    theirs = _exists(hook)
    if theirs and _exists(saved):
        raise _changed(hook, saved)
    hooks_dir.mkdir(parents=True, exist_ok=True)
    staged = _write_temporary(hooks_dir, text)
    try:
        if theirs:
            os.rename(hook, saved)  # theirs, untouched: bytes, mode, a symlink as a symlink
        os.replace(staged, hook)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return Installed(hook, saved if _exists(saved) else None, already=False)


def uninstall(hooks_dir: Path) -> Uninstalled:
    """Take our pre-commit hook out of ``hooks_dir`` and put the original back, byte for byte.

    Raises:
        HookChanged: the hook in place is not ours, and the one we saved is still kept.
    """
    hook, saved = hooks_dir / HOOK_NAME, hooks_dir / SAVED_NAME
    ours = is_ours(hook)
    if _exists(saved):
        if _exists(hook) and not ours:
            raise _changed(hook, saved)
        os.replace(saved, hook)  # one step: theirs is back, ours is gone
        return Uninstalled(hook, removed=True, restored=True)
    if ours:
        hook.unlink()
        return Uninstalled(hook, removed=True, restored=False)
    return Uninstalled(hook, removed=False, restored=False)


def _exists(path: Path) -> bool:
    return os.path.lexists(path)  # a dangling symlink is still someone's hook


def _changed(hook: Path, saved: Path) -> HookChanged:
    return HookChanged(
        f"{hook} is not the crosstalk guard any more, and the hook it replaced is still kept at "
        f"{saved}; nothing was changed. Keep one of them: delete or move the other, then run "
        "the command again."
    )


def _write_temporary(directory: Path, data: bytes) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{HOOK_NAME}.", suffix=".crosstalk-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, 0o755)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _write_executable(path: Path, data: bytes) -> None:
    staged = _write_temporary(path.parent, data)
    try:
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
