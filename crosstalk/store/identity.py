"""The identity file, ``identity.json``: this identity's secret keys and name, 0600.

It lives apart from ``state.db`` (DESIGN.md §4) so that it can move to the OS keyring later and so
that a damaged database never costs the keys. The record goes through the one cattrs converter,
bytes as base64. A file that does not parse, or has the wrong shape, is reported and left as it is.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
import nacl.public
import nacl.signing
import nacl.utils
from cattrs.errors import BaseValidationError

from crosstalk.crypto import fingerprint
from crosstalk.errors import LocalProtocolError
from crosstalk.store.files import damaged, read_json_file, write_private_atomic
from crosstalk.store.keyring_store import KEYRING, SEED_FIELDS, STORAGE_FIELD, load_seeds
from crosstalk.wire.converter import converter

SECRET_SIZE = 32


def _secret_size(_instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != SECRET_SIZE:
        raise ValueError(f"{attribute.name} must be {SECRET_SIZE} bytes")


@attrs.frozen
class IdentityRecord:
    """Who this state directory is: label, machine name and the two 32-byte secret seeds.

    ``signing_seed`` is the Ed25519 seed, ``box_secret`` the X25519 secret key. Both are left
    out of ``repr`` so that a log line or a traceback never shows them.
    """

    label: str
    machine: str
    signing_seed: bytes = attrs.field(repr=False, validator=_secret_size)
    box_secret: bytes = attrs.field(repr=False, validator=_secret_size)
    created_at: float

    @property
    def ed25519_public(self) -> bytes:
        """The Ed25519 public key (32 bytes) that the fingerprint is made from."""
        return bytes(nacl.signing.SigningKey(self.signing_seed).verify_key)

    @property
    def x25519_public(self) -> bytes:
        """The X25519 public key (32 bytes) that room keys are sealed to."""
        return bytes(nacl.public.PrivateKey(self.box_secret).public_key)


# The JSON types each field must have before the converter may look at it. cattrs would
# otherwise coerce (``str(5)`` is a fine label to it); a wrong type here means a damaged file.
_SHAPE: dict[str, tuple[type, ...]] = {
    "label": (str,),
    "machine": (str,),
    "signing_seed": (str,),
    "box_secret": (str,),
    "created_at": (int, float),
}


def _shape_problem(data: object) -> str | None:
    """Why ``data`` is not an identity record's JSON, or ``None`` when it looks like one."""
    if not isinstance(data, dict):
        return f"expected a JSON object, found {type(data).__name__}"
    for name, types in _SHAPE.items():
        if name not in data:
            return f"the field {name!r} is missing"
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"the field {name!r} has the wrong type ({type(value).__name__})"
    return None


def load_identity(path: Path) -> IdentityRecord | None:
    """Read the identity at ``path``; ``None`` when there is none yet.

    Raises:
        DamagedState: naming the file, when it does not parse or does not have an identity's
            shape. The file is left untouched.
    """
    data = read_json_file(path)
    if data is None and not path.exists():
        return None
    if isinstance(data, dict) and data.get(STORAGE_FIELD) == KEYRING:
        data = _with_keyring_seeds(path, data)
    problem = _shape_problem(data)
    if problem is not None:
        raise damaged(path, f"is not an identity: {problem}")
    try:
        return converter.structure(data, IdentityRecord)
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise damaged(path, f"is not an identity: {_first_cause(exc)}") from None


def _with_keyring_seeds(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    fingerprint = data.get("fingerprint")
    if not isinstance(fingerprint, str):
        raise damaged(path, "keeps its keys in the OS keyring but names no fingerprint")
    seeds = load_seeds(fingerprint)
    return {**data, **{k: base64.b64encode(v).decode() for k, v in seeds.items()}}


def stored_in_keyring(path: Path) -> bool:
    """Whether ``path`` keeps its seeds in the OS keyring (after ``crosstalk secure``)."""
    data = read_json_file(path)
    return isinstance(data, dict) and data.get(STORAGE_FIELD) == KEYRING


def _first_cause(exc: BaseException) -> str:
    """A short reason from a (possibly grouped) cattrs error, without any field values."""
    if isinstance(exc, BaseValidationError) and exc.exceptions:
        return _first_cause(exc.exceptions[0])
    return str(exc)


def identity_bytes(record: IdentityRecord, *, keyring: bool = False) -> bytes:
    """The file contents for ``record``: sorted JSON, one trailing newline.

    With ``keyring``, the seeds are left out: the file says where they are instead.
    """
    data: dict[str, Any] = converter.unstructure(record)
    if keyring:
        for field in SEED_FIELDS:
            data.pop(field)
        data[STORAGE_FIELD] = KEYRING
        data["fingerprint"] = fingerprint(record.ed25519_public)
    return (json.dumps(data, sort_keys=True, indent=2) + "\n").encode("utf-8")


def save_identity(
    path: Path, record: IdentityRecord, *, replace_keys: bool = False, keyring: bool | None = None
) -> None:
    """Write ``record`` to ``path`` atomically, mode 0600.

    Losing the secret keys loses the identity, so by default this only overwrites an existing
    identity with the *same* keys (a new label or machine name). A file that does not parse is
    never overwritten.

    Args:
        path: the identity file (``Home.identity``); its directory must exist.
        record: what to store.
        replace_keys: allow replacing an identity that has different keys.
        keyring: keep the seeds out of the file (they are in the OS keyring); None keeps
            whatever the existing file does.

    Raises:
        DamagedState: the existing file does not parse; it is left untouched.
        LocalProtocolError: the existing identity has other keys and ``replace_keys`` is false.
    """
    existing = load_identity(path)
    if existing is not None and not replace_keys and not _same_keys(existing, record):
        raise LocalProtocolError(
            f"{path} already holds a different identity; refusing to overwrite its keys."
        )
    if keyring is None:
        keyring = existing is not None and stored_in_keyring(path)
    write_private_atomic(path, identity_bytes(record, keyring=keyring))


def _same_keys(a: IdentityRecord, b: IdentityRecord) -> bool:
    return a.signing_seed == b.signing_seed and a.box_secret == b.box_secret


def default_label() -> str:
    """``git config user.name``, else ``$USER``, else "me" (runs git: call it in a thread)."""
    try:
        name = subprocess.run(
            ["git", "config", "user.name"], capture_output=True, text=True, timeout=2, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return name or os.environ.get("USER") or "me"


def new_identity(label: str | None) -> IdentityRecord:
    """A fresh identity: new secret seeds, this machine's name, ``label`` or the default one
    (blocking: it may run git; call it in a thread)."""
    return IdentityRecord(
        label=label or default_label(),
        machine=socket.gethostname(),
        signing_seed=nacl.utils.random(SECRET_SIZE),
        box_secret=nacl.utils.random(SECRET_SIZE),
        created_at=time.time(),
    )
