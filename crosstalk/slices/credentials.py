"""What counts as a credential, by name and by content, so a slice never carries one.

Names: key and token files (``.git-credentials``, ``.netrc``, ``.npmrc``, ``.pypirc``, ssh keys,
``*.p12``/``*.pfx``…), everything under ``.git/`` (its ``config`` often holds a token in a
remote URL), and the folders cloud and container tools keep their logins in (``.aws``,
``.config/gcloud``, ``.azure``, ``.docker``, ``.kube``, ``.ssh``, ``.gnupg``). Content: a short list
of patterns for private keys and well-known token formats, each tested in
``tests/security/test_credentials.py``. A hit names the reason, never the secret.

Content is scanned in pieces of ``SCAN_PIECE`` characters, each searched together with the last
``SCAN_OVERLAP`` characters before it, so no single regex call holds the GIL for long (a scan
runs on a worker thread beside the daemon's event loop: one search over a 400 MB slice held the
loop for minutes) and a secret up to ``SCAN_OVERLAP`` characters long is found wherever the
pieces were cut. (A window can begin inside a word, where ``\b`` matches: that can only refuse
more, never less.)
"""

from __future__ import annotations

import re
from pathlib import PurePath

_SECRET_NAMES = {
    ".env",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
    "credentials",
    "credentials.json",
    "credentials.db",
    "access_tokens.db",
    "application_default_credentials.json",
    "accesstokens.json",
    "msal_token_cache.json",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "known_hosts",
    "authorized_keys",
}
_SECRET_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".env.")
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".asc", ".gpg")
_SECRET_DIRS = {
    ".git",
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".docker",
    ".azure",
    ".gcloud",
    "gcloud",
    ".crosstalk",
}

# (reason, pattern). Kept short and specific: each matches one token family's documented shape.
_CONTENT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----")),
    ("an AWS access key", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("an API secret key", re.compile(r"\bsk-(ant-|proj-)?[A-Za-z0-9_-]{32,}")),
    ("a Stripe secret key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{20,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("an npm token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("a PyPI token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}")),
    (
        "a password in a URL",
        re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@\"']+:[^/\s@\"']{6,}@[\w.-]"),
    ),
)


def credential_name(path: PurePath) -> str | None:
    """Why ``path`` (relative to the project, or a bare name) is a credential file, else None."""
    name = path.name.lower()
    if name in _SECRET_NAMES or name.startswith(_SECRET_PREFIXES):
        return f"{name} is a credential file"
    if name.endswith(_SECRET_SUFFIXES):
        return f"{name} is a key or certificate file"
    parts = [part.lower() for part in path.parts[:-1]]
    for part in parts:
        if part in _SECRET_DIRS:
            return f"files under {part}/ hold credentials"
    return None


SCAN_PIECE = 64 * 1024
SCAN_OVERLAP = 4 * 1024


class SecretScan:
    """The content scan over text that comes in pieces: :meth:`feed` each in order."""

    def __init__(self) -> None:
        self._tail = ""
        self.reason: str | None = None

    def feed(self, piece: str) -> str | None:
        """Scan ``piece`` after what came before; the reason for the first secret found."""
        if self.reason is None and piece:
            window = self._tail + piece
            for reason, pattern in _CONTENT_PATTERNS:
                if pattern.search(window):
                    self.reason = f"it contains what looks like {reason}"
                    break
            self._tail = window[max(len(window) - SCAN_OVERLAP, 0) :]
        return self.reason


def credential_content(text: str) -> str | None:
    """Why ``text`` looks like it carries a secret (the kind, never the secret), else None."""
    scan = SecretScan()
    for start in range(0, len(text), SCAN_PIECE):
        if scan.feed(text[start : start + SCAN_PIECE]) is not None:
            break
    return scan.reason
