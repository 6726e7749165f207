"""Credential detection: the files and the content a slice must never carry (finding 4)."""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePath

import pytest

from crosstalk.errors import CredentialRefused
from crosstalk.slices.build import build_slice
from crosstalk.slices.credentials import SCAN_PIECE, credential_content, credential_name

CREDENTIAL_PATHS = [
    ".git/config",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".docker/config.json",
    ".kube/config",
    ".aws/credentials",
    ".aws/config",
    ".config/gcloud/application_default_credentials.json",
    ".config/gcloud/credentials.db",
    ".azure/msal_token_cache.json",
    "certs/client.p12",
    "certs/client.pfx",
    "deploy/server.pem",
    ".ssh/id_ed25519",
    "id_rsa.pub",
    ".env",
    ".env.production",
]

# Made-up values in each family's documented shape, assembled so this file holds none whole.
TOKENS = {
    "private key": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
    "rsa key": "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow\n",
    "aws": "aws_access_key_id = " + "AKIA" + "ABCDEFGHIJKLMNOP",
    "github": "token: " + "ghp_" + "a" * 36,
    "github pat": "github_pat_" + "B" * 60,
    "gitlab": "glpat-" + "x" * 20,
    "slack": "xoxb-" + "1234567890-abc",
    "api key": "OPENAI_API_KEY=" + "sk-" + "proj-" + "Z" * 40,
    "stripe": "sk_live_" + "9" * 24,
    "google": "AIza" + "S" * 35,
    "npm": "//registry.npmjs.org/:_authToken=" + "npm_" + "n" * 36,
    "pypi": "password = " + "pypi-AgE" + "I" * 60,
    "url": "url = https://" + "user:s3cr3tpass" + "@github.com/me/repo.git",
}

HARMLESS = [
    "print('hello')\n",
    "See https://example.com/docs and http://localhost:8080/x\n",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA me@host\n",  # a public key is not a secret
    "The word password and the word token are fine on their own.\n",
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    "git@github.com:me/repo.git\n",
]


@pytest.mark.parametrize("path", CREDENTIAL_PATHS)
def test_credential_files_are_known_by_name(path: str) -> None:
    """Each credential file in the list is recognised by its path."""
    assert credential_name(PurePath(path)) is not None


@pytest.mark.parametrize("path", ["src/app.py", "README.md", "config/settings.toml", "docs/env.md"])
def test_ordinary_files_are_not_credentials(path: str) -> None:
    """Ordinary project files are not mistaken for credentials."""
    assert credential_name(PurePath(path)) is None


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_content_that_looks_like_a_key_or_token_is_caught(kind: str) -> None:
    """Each pattern catches its token family, and the reason never quotes the secret."""
    reason = credential_content(f"some text\n{TOKENS[kind]}\nmore text\n")
    assert reason is not None
    assert TOKENS[kind].strip().split()[-1] not in reason


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_content_passes(text: str) -> None:
    """Code, links, public keys and certificates are not flagged."""
    assert credential_content(text) is None


@pytest.mark.parametrize("plant", [False, True])
def test_a_secret_across_two_scan_pieces_is_caught(
    plant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Content is scanned in pieces (so no one search holds the GIL for long); every kind of
    secret that straddles the cut between two pieces is still caught, by the overlap each piece
    is searched with. The planted bug scans the pieces with no overlap and misses them."""
    if plant:
        monkeypatch.setattr("crosstalk.slices.credentials.SCAN_OVERLAP", 0)
    missed = []
    for kind, secret in sorted(TOKENS.items()):
        # The first piece ends one character before the shortest caught prefix of the secret.
        caught = next(n for n in range(len(secret) + 1) if credential_content(secret[:n]))
        before = ("x " * SCAN_PIECE)[: SCAN_PIECE - caught] + "\n"
        text = before + secret + "\n" + "tail " * 100
        assert len(before) + caught - 1 == SCAN_PIECE
        if credential_content(text) is None:
            missed.append(kind)
    assert missed == (sorted(TOKENS) if plant else [])


def test_a_git_config_cannot_be_attached(tmp_path: Path) -> None:
    """``file:.git/config`` is credential_refused, with the reason in the sentence."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(CredentialRefused, match=r"\.git/") as caught:
        build_slice("file:.git/config", cwd=tmp_path)
    assert caught.value.code == "credential_refused"


def test_a_file_holding_a_token_cannot_be_attached(tmp_path: Path) -> None:
    """An innocently named file whose content is a token is refused, saying what it looked like."""
    (tmp_path / "notes.txt").write_text(f"deploy with {TOKENS['github']}\n")
    with pytest.raises(CredentialRefused, match="GitHub token"):
        build_slice("file:notes.txt", cwd=tmp_path)


def test_a_symlink_to_a_credential_is_refused(tmp_path: Path) -> None:
    """A harmless-looking link that resolves to a credential file is refused."""
    (tmp_path / ".git-credentials").write_text("x\n")
    (tmp_path / "readme.txt").symlink_to(tmp_path / ".git-credentials")
    with pytest.raises(CredentialRefused):
        build_slice("file:readme.txt", cwd=tmp_path)
