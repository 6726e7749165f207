"""Keeping the identity's secret seeds in the OS keyring (``crosstalk secure``).

After ``secure``, ``identity.json`` keeps the label and machine name and says
``"storage": "keyring"``; the two seeds live in the keyring under the service ``crosstalk`` and
the identity's fingerprint. Where no keyring backend exists (a headless Linux box without a
Secret Service, for instance) we say so plainly and change nothing.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from crosstalk.errors import DamagedState, NoKeyring

SERVICE = "crosstalk"
STORAGE_FIELD = "storage"
KEYRING = "keyring"
SEED_FIELDS = ("signing_seed", "box_secret")

def _backend() -> Any:
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        raise NoKeyring(
            "The keyring package is not installed, so your keys stay in identity.json "
            "(readable only by you)."
        ) from None
    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        raise NoKeyring(
            "No OS keyring is available here, so your keys stay in identity.json "
            "(readable only by you). Nothing was changed."
        )
    return backend


def store_seeds(fingerprint: str, seeds: dict[str, bytes]) -> None:
    """Put the seeds in the keyring and read them back; raise NoKeyring if that fails."""
    backend = _backend()
    for field, value in seeds.items():
        backend.set_password(SERVICE, f"{fingerprint}/{field}", base64.b64encode(value).decode())
    if load_seeds(fingerprint) != seeds:
        raise NoKeyring("The keyring did not give the keys back as stored; nothing was changed.")


def load_seeds(fingerprint: str) -> dict[str, bytes]:
    """The seeds kept in the keyring for ``fingerprint``."""
    backend = _backend()
    seeds = {}
    for field in SEED_FIELDS:
        stored = backend.get_password(SERVICE, f"{fingerprint}/{field}")
        try:
            seeds[field] = base64.b64decode(stored or "", validate=True)
        except (binascii.Error, ValueError):
            seeds[field] = b""
        if len(seeds[field]) != 32:
            raise DamagedState(
                f"identity.json says the keys are in the OS keyring, but the keyring has no "
                f"usable {field} for {fingerprint}; it was left untouched."
            )
    return seeds
