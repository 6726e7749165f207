"""Building slices from what the sender points at: a diff, a file, the last turns, a note.

``--slice diff[:REF]`` (``git diff`` of the project), ``file:PATH``, ``turns[:N]`` (the last N
turns of the agent's transcript: the one the sender names, else the one its session recorded
when the hook registered it, see ``crosstalk.store.sessions.current_transcript``),
``note:TEXT``. Credential files and paths outside the project are refused; content past 128 KiB
is cut with a marker saying how much was left out.

A file is never read whole: its size is taken first, then at most ``FILE_READ_LIMIT`` bytes
(the cap, and a margin so a secret cut in two by the cap is still seen whole by the scan) are
read in ``READ_CHUNK`` pieces; the rest is only counted, in the marker. A diff goes to a
temporary file and is read the same way; a turns slice reads only the transcript's last
``TURNS_READ_LIMIT`` bytes. Slices are built on a worker thread, and the credential scan goes in
pieces (:mod:`crosstalk.slices.credentials`), so the daemon's event loop keeps running: a 400 MB
file read and scanned whole once held the daemon for minutes, and its send was delivered after the
CLI had given up on it.

Which project: the daemon takes ``file:`` and ``diff:`` slices only from a project one of its
agent sessions works in (:func:`slice_root` over
:func:`crosstalk.store.sessions.slice_projects`). A request's ``cwd`` is written by whoever
sent it (the page, any program on the control socket), so it only chooses among those
projects; ``cwd="/"`` names none of them and is ``not_in_project``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from crosstalk.errors import (
    CredentialRefused,
    InvalidSlice,
    NotInProject,
    Refused,
    TooLarge,
    UsageError,
)
from crosstalk.slices.credentials import SCAN_OVERLAP, credential_content, credential_name
from crosstalk.wire.room_ops import MAX_SLICE, Slice

_REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./~^@{}+-]*")
_RANGE = re.compile(r"\.\.\.?")
_MARKER_ROOM = 200  # bytes of the cap kept for the marker that says what was cut

READ_CHUNK = 64 * 1024
# A UTF-8 character is at most 4 bytes, so this margin holds SCAN_OVERLAP characters.
FILE_READ_LIMIT = MAX_SLICE + 4 * SCAN_OVERLAP
# How much of a transcript's end is read for a turns slice: a turn is a JSON line, parsed whole,
# so this is more than the cap; one big tool result can be a turn of megabytes.
TURNS_READ_LIMIT = 4 * 2**20


def is_credential(path: Path) -> bool:
    """Whether ``path`` looks like a secret: key files, env files, credential folders."""
    return credential_name(path) is not None


def project_root(cwd: Path) -> Path:
    """The git root containing ``cwd``, else ``cwd`` itself."""
    try:
        out = subprocess.run(
            ["git", "-C", str(cwd), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return cwd.resolve()
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 else cwd.resolve()


def read_capped(stream: BinaryIO, size: int, limit: int) -> tuple[bytes, int]:
    """At most ``limit`` bytes from the start of ``stream``, read ``READ_CHUNK`` at a time.

    Args:
        stream: an open binary file, at its start.
        size: its size as ``stat`` gave it before reading.
        limit: the most bytes to read; nothing past it is ever asked for.

    Returns:
        The bytes read, and how many bytes of ``size`` were left unread.
    """
    pieces: list[bytes] = []
    taken = 0
    while taken < limit:
        piece = stream.read(min(READ_CHUNK, limit - taken))
        if not piece:
            break
        pieces.append(piece)
        taken += len(piece)
    return b"".join(pieces), max(size - taken, 0)


def _cap(kind: str, label: str, content: str, *, left_out: int = 0) -> Slice:
    """The slice of ``content``, cut to the cap with a marker; ``left_out`` counts bytes of the
    source that were never read, so are not in ``content`` either."""
    data = content.encode()
    truncated = len(data) > MAX_SLICE or left_out > 0
    if truncated:
        keep = min(len(data), MAX_SLICE - _MARKER_ROOM)
        marker = f"\n[… cut: {len(data) - keep + left_out} more bytes not sent]\n"
        data = data[:keep].decode(errors="ignore").encode() + marker.encode()
    text = data.decode(errors="replace")
    return Slice(kind, label, text, hashlib.sha256(text.encode()).hexdigest(), truncated)


def _refuse_secrets(what: str, path: Path | None, content: str) -> None:
    reason = (credential_name(path) if path is not None else None) or credential_content(content)
    if reason is not None:
        raise CredentialRefused(f"{what} was not attached: {reason}.")


def _inside(spec: str, root: Path) -> Path:
    """``spec`` as a path relative to ``root``, refusing anything that resolves outside it."""
    path = (root / spec).resolve()
    if not path.is_relative_to(root):
        raise Refused(f"{spec} is outside the project ({root}); only project files can be sliced.")
    return path


def _file(spec: str, root: Path) -> Slice:
    path = _inside(spec, root)
    for named in (path.relative_to(root), Path(spec), Path(path.name)):
        if (reason := credential_name(named)) is not None:
            raise CredentialRefused(f"{spec} was not attached: {reason}.")
    if not path.is_file():
        raise UsageError(f"There is no file {spec} in the project.")
    with path.open("rb") as stream:
        data, left_out = read_capped(stream, os.fstat(stream.fileno()).st_size, FILE_READ_LIMIT)
    content = data.decode(errors="replace")
    _refuse_secrets(spec, None, content)  # all that was read: what is sent, and a margin
    return _cap("file", str(path.relative_to(root)), content, left_out=left_out)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git`` in ``root`` with pathspecs taken literally; callers put user text after ``--``."""
    argv = ["git", "-C", str(root), "--literal-pathspecs", *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {args[0]} failed: {exc}") from None


def _is_revision(word: str, root: Path) -> bool:
    """Whether ``word`` names a commit, or a range ``A..B`` / ``A...B`` (a side may be empty)."""
    sides = _RANGE.split(word, maxsplit=1)
    if len(sides) == 2 and not any(sides):
        return False
    for side in sides:
        if not side:
            continue
        if not _REVISION.fullmatch(side):
            return False
        found = _git(
            root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{side}^{{commit}}"
        )
        if found.returncode != 0:
            return False
    return True


def parse_diff_spec(spec: str, root: Path) -> tuple[list[str], list[str]]:
    """Split a ``diff:`` argument into revisions and project paths, refusing anything else.

    Words are separated by spaces. A word that starts with ``-`` is refused before git sees it
    (``--output=FILE`` would truncate a file), as is one with control characters; a word that is
    not a commit or range must be a path inside the project, and not a credential file.
    """
    revisions: list[str] = []
    paths: list[str] = []
    for word in spec.split():
        if word.startswith("-") or any(ord(ch) < 32 or ord(ch) == 127 for ch in word):
            raise InvalidSlice(
                f"diff:{spec} was refused: {word!r} is not a revision or a path "
                "(a diff slice takes revisions like HEAD~2 or main..topic, and project paths)."
            )
        if not paths and _is_revision(word, root):
            revisions.append(word)
            continue
        try:
            path = _inside(word, root)
        except Refused:
            raise InvalidSlice(
                f"diff:{spec} was refused: {word} is neither a revision nor a project path."
            ) from None
        relative = path.relative_to(root)
        if (reason := credential_name(relative)) is not None:
            raise CredentialRefused(f"diff of {word} was not attached: {reason}.")
        paths.append(str(relative) if relative.parts else ".")
    return revisions, paths


def _diff_to(output: BinaryIO, root: Path, *args: str) -> None:
    """``git diff ARGS`` (user words after ``--end-of-options``) written to ``output``."""
    argv = ["git", "-C", str(root), "--literal-pathspecs", "diff", "--no-color", "--no-ext-diff",
            "--no-textconv", *args]
    try:
        done = subprocess.run(argv, stdout=output, stderr=subprocess.PIPE, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git diff failed: {exc}") from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip() or "not a git repository"
        raise UsageError(f"git diff failed: {why}")


def _diff(spec: str | None, root: Path) -> Slice:
    """The diff, which is never held whole: git writes it to a temporary file, of which only
    the cap and the scan's margin are read. Every file it touches is checked by name first
    (``--name-only``, renames as their two sides), so a credential file anywhere in it refuses
    the whole diff, as when the diff was read whole."""
    revisions, paths = parse_diff_spec(spec or "", root)
    words = ["--end-of-options", *revisions, "--", *paths]
    with tempfile.TemporaryFile() as names:
        _diff_to(names, root, "--no-renames", "--name-only", "-z", *words)
        names.seek(0)
        touched = names.read().decode(errors="replace").split("\0")
    for name in filter(None, touched):
        if (reason := credential_name(Path(name))) is not None:
            raise CredentialRefused(f"the diff was not attached: it touches {name}, and {reason}.")
    with tempfile.TemporaryFile() as diff:
        _diff_to(diff, root, *words)
        diff.seek(0)
        data, left_out = read_capped(diff, os.fstat(diff.fileno()).st_size, FILE_READ_LIMIT)
    content = data.decode(errors="replace")
    _refuse_secrets("the diff", None, content)
    return _cap("diff", f"diff {spec}" if spec else "diff", content, left_out=left_out)


def needs_project(specs: list[str]) -> bool:
    """Whether any of these ``--slice`` specs reads the project (a file or a diff)."""
    return any(spec.partition(":")[0] in ("file", "diff") for spec in specs)


def slice_root(cwd: str | None, projects: Sequence[str]) -> Path:
    """The project ``file:`` and ``diff:`` slices are taken from: the innermost of
    ``projects`` holding ``cwd`` (both with symlinks and ``..`` resolved), narrowed as before
    to :func:`project_root` at ``cwd`` (its git root, else ``cwd`` itself) when that lies inside
    it; with no ``cwd``, the only project there is.

    Raises:
        NotInProject: no project holds ``cwd`` (or there is none, or several and no ``cwd``).
        InvalidSlice: ``cwd`` has a NUL in it.
    """
    if not projects:
        raise NotInProject(
            "A file or diff slice comes from a project one of your agent sessions works in, "
            "and no session has registered one; send it from your agent's project, or attach "
            "the words with note:TEXT."
        )
    if cwd is not None and "\x00" in cwd:
        raise InvalidSlice("A slice names no place with a NUL character in it.")
    real = sorted({Path(os.path.realpath(p)) for p in projects if "\x00" not in p},
                  key=lambda p: len(p.parts))
    if cwd is None:
        if len(real) != 1:
            raise NotInProject("Say which project the slice comes from: your sessions work in "
                               f"{len(real)} projects.")
        return real[0]
    here = Path(os.path.realpath(cwd))
    holding = [p for p in real if here.is_relative_to(p)]
    if not holding:
        raise NotInProject(
            f"{cwd[:200]} is in no project your agent sessions work in; a file or diff slice "
            "comes only from one of those."
        )
    chosen = holding[-1]
    root = project_root(here)
    return root if root.is_relative_to(chosen) else chosen


def needs_transcript(specs: list[str]) -> bool:
    """Whether any of these ``--slice`` specs is a turns slice."""
    return any(spec.partition(":")[0] == "turns" for spec in specs)


def tail_lines(stream: BinaryIO, size: int, limit: int) -> tuple[list[str], bool]:
    """The whole lines in the last ``limit`` bytes of ``stream`` (``size`` long), and whether
    the file holds more before them. A line cut by the window's start is dropped."""
    start = max(size - limit, 0)
    stream.seek(start)
    data, _ = read_capped(stream, size - start, limit)
    lines = data.decode(errors="replace").split("\n")
    if start > 0:
        lines = lines[1:]
    return lines, start > 0


def _turns(count: int, transcript: str | None) -> Slice:
    """The last ``count`` turns, found from the transcript's end: only its last
    ``TURNS_READ_LIMIT`` bytes are read (a long session's transcript runs to hundreds of MB),
    so turns that begin before them are not found, and the label says how many were."""
    if not transcript:
        raise UsageError(
            "A turns slice needs the agent's transcript, and no session here recorded one; "
            "send it from an agent session whose hooks are installed."
        )
    try:
        with Path(transcript).open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            lines, more = tail_lines(stream, size, TURNS_READ_LIMIT)
    except OSError as exc:
        raise UsageError(
            f"The agent's transcript {transcript} could not be read ({exc.strerror or exc})."
        ) from None
    turns: list[str] = []
    for line in reversed(lines):
        if len(turns) == count:
            break
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") in {"user", "assistant"}:
            turns.append(json.dumps(entry.get("message", entry), ensure_ascii=False))
    if more and count and not turns:
        raise TooLarge(
            f"The transcript's last turn alone is over {TURNS_READ_LIMIT // 2**20} MiB; "
            "attach what you mean as a file: or note: slice instead."
        )
    content = "\n".join(reversed(turns))
    label = f"last {count} turns"
    if more and len(turns) < count:
        label = (f"last {len(turns)} turns (of {count} asked: the others begin before the "
                 f"transcript's last {TURNS_READ_LIMIT // 2**20} MiB)")
    _refuse_secrets(f"the last {count} turns", None, content[:FILE_READ_LIMIT])  # what is sent
    return _cap("turns", label, content)


def build_slice(
    spec: str,
    *,
    cwd: Path | None = None,
    transcript: str | None = None,
    root: Path | None = None,
) -> Slice:
    """One slice from its ``--slice`` spec, refusing secrets and paths outside the project:
    ``root`` when given (the daemon passes :func:`slice_root`'s), else the git root at
    ``cwd``."""
    kind, _, arg = spec.partition(":")
    if kind == "note":
        return _cap("note", "note", arg)
    if kind not in {"file", "diff", "turns"}:
        raise UsageError(
            f"Unknown slice {spec[:80]!r}: use diff[:REF], file:PATH, turns[:N] or note:TEXT."
        )
    if "\x00" in spec or "\x00" in str(cwd or ""):
        raise InvalidSlice("A slice names no file or revision with a NUL character in it.")
    try:
        if kind == "turns":
            return _turns(int(arg) if arg.isdigit() and len(arg) < 6 else 5, transcript)
        if root is None:
            if cwd is None:
                raise NotInProject(f"The slice {spec[:80]!r} needs the project it comes from.")
            root = project_root(cwd)
        return _file(arg, root) if kind == "file" else _diff(arg or None, root)
    except OSError as exc:  # a name too long for the file system, a folder we may not read…
        raise InvalidSlice(
            f"The slice {spec[:80]!r} could not be read ({exc.strerror or exc})."
        ) from None
