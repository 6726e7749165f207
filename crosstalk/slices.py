"""Building slices from what the sender points at: a diff, a file, the last turns, a note.

``--slice diff[:REF]`` (``git diff`` of the project), ``file:PATH``, ``turns[:N]`` (the last N
turns of the agent's transcript: the one the sender names, else the one its session recorded
when the hook registered it, see ``crosstalk.store.sessions.current_transcript``),
``note:TEXT``. Credential files and paths outside the project are refused; content past 128 KiB
is cut with a marker saying how much was left out.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from crosstalk.errors import Refused, UsageError
from crosstalk.wire.room_ops import MAX_SLICE, Slice

_SECRET_NAMES = {
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    "credentials",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "known_hosts",
    "authorized_keys",
    ".htpasswd",
}
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".asc", ".gpg")
_SECRET_DIRS = {".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", ".gcloud", ".crosstalk"}


def is_credential(path: Path) -> bool:
    """Whether ``path`` looks like a secret: key files, env files, credential folders."""
    name = path.name.lower()
    if name in _SECRET_NAMES or name.startswith(".env.") or name.endswith(_SECRET_SUFFIXES):
        return True
    if name.startswith(("id_rsa", "id_ed25519", "id_ecdsa")):
        return True
    return any(part.lower() in _SECRET_DIRS for part in path.parts)


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


def _cap(kind: str, label: str, content: str) -> Slice:
    data = content.encode()
    truncated = len(data) > MAX_SLICE
    if truncated:
        marker = f"\n[… cut: {len(data) - MAX_SLICE + 200} more bytes not sent]\n"
        data = data[: MAX_SLICE - 200].decode(errors="ignore").encode() + marker.encode()
    text = data.decode(errors="replace")
    return Slice(kind, label, text, hashlib.sha256(text.encode()).hexdigest(), truncated)


def _file(spec: str, root: Path) -> Slice:
    path = (root / spec).resolve()
    if not path.is_relative_to(root):
        raise Refused(f"{spec} is outside the project ({root}); only project files can be sliced.")
    if is_credential(path.relative_to(root)) or is_credential(Path(path.name)):
        raise Refused(f"{spec} looks like a credential file; it was not attached.")
    if not path.is_file():
        raise UsageError(f"There is no file {spec} in the project.")
    return _cap("file", str(path.relative_to(root)), path.read_text(errors="replace"))


def _diff(ref: str | None, root: Path) -> Slice:
    args = ["git", "-C", str(root), "diff", "--no-color", "--no-ext-diff"] + ([ref] if ref else [])
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git diff failed: {exc}") from None
    if out.returncode != 0:
        raise UsageError(f"git diff failed: {out.stderr.strip() or 'not a git repository'}")
    return _cap("diff", f"diff {ref}" if ref else "diff", out.stdout)


def needs_transcript(specs: list[str]) -> bool:
    """Whether any of these ``--slice`` specs is a turns slice."""
    return any(spec.partition(":")[0] == "turns" for spec in specs)


def _turns(count: int, transcript: str | None) -> Slice:
    if not transcript:
        raise UsageError(
            "A turns slice needs the agent's transcript, and no session here recorded one; "
            "send it from an agent session whose hooks are installed."
        )
    try:
        lines = Path(transcript).read_text(errors="replace").splitlines()
    except OSError as exc:
        raise UsageError(
            f"The agent's transcript {transcript} could not be read ({exc.strerror or exc})."
        ) from None
    turns = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") in {"user", "assistant"}:
            turns.append(json.dumps(entry.get("message", entry), ensure_ascii=False))
    return _cap("turns", f"last {count} turns", "\n".join(turns[-count:]))


def build_slice(spec: str, *, cwd: Path, transcript: str | None = None) -> Slice:
    """One slice from its ``--slice`` spec, refusing secrets and paths outside the project."""
    kind, _, arg = spec.partition(":")
    root = project_root(cwd)
    if kind == "note":
        return _cap("note", "note", arg)
    if kind == "file":
        return _file(arg, root)
    if kind == "diff":
        return _diff(arg or None, root)
    if kind == "turns":
        return _turns(int(arg) if arg.isdigit() else 5, transcript)
    raise UsageError(f"Unknown slice {spec!r}: use diff[:REF], file:PATH, turns[:N] or note:TEXT.")
