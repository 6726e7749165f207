"""Pure cryptographic functions over PyNaCl and spake2.

No function here draws its own randomness: nonces and keys are passed in, so test vectors
can be pinned. The callers (actors) draw them from ``nacl.utils.random``.
"""

from __future__ import annotations

import hashlib


def fingerprint(ed25519_public: bytes) -> str:
    """First 64 bits of SHA-256 of an Ed25519 public key, shown ``xxxx-xxxx-xxxx-xxxx``."""
    digest = hashlib.sha256(ed25519_public).hexdigest()[:16]
    return "-".join(digest[i : i + 4] for i in range(0, 16, 4))
