"""The relay's own Ed25519 key, kept in ``--data/relay.key`` (0600)."""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from nacl.signing import SigningKey
from nacl.utils import random

from crosstalk.errors import DamagedState

KEY_FILE = "relay.key"


def prepare_data_dir(data: Path) -> None:
    """Create the data directory 0700 (tightening it if it is looser)."""
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    if data.stat().st_mode & 0o077:
        data.chmod(0o700)


def load_or_create_key(data: Path) -> SigningKey:
    """The relay key from ``data``, made on first start; an unreadable file is never replaced."""
    path = data / KEY_FILE
    if path.exists():
        try:
            seed = base64.b64decode(json.loads(path.read_text())["seed"], validate=True)
            if len(seed) != 32:
                raise ValueError("seed is not 32 bytes")
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise DamagedState(
                f"the relay key file {path} does not parse ({exc}); restore it or move it aside "
                "(a new key makes every client that pinned this relay refuse it)"
            ) from None
        return SigningKey(seed)
    seed = random(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"seed": base64.b64encode(seed).decode()}, f)
        f.flush()
        os.fsync(f.fileno())
    return SigningKey(seed)
