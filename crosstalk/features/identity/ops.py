"""``secure``: move this identity's secret seeds into the OS keyring."""

from __future__ import annotations

import functools
from typing import Protocol

import trio

from crosstalk.features.caps import Homed, Identified
from crosstalk.features.feature import Plugs, op
from crosstalk.store.identity import save_identity
from crosstalk.store.keyring_store import KEYRING, store_seeds
from crosstalk.wire.control.params import NoParams
from crosstalk.wire.control.replies.daemon import SecureReply
from crosstalk.wire.control.table import SECURE


class Host(Identified, Homed, Protocol):
    """What ``secure`` uses: the identity and the home it is saved in."""


async def secure(daemon: Host, _: NoParams) -> SecureReply:
    """The ``secure`` op: move the identity's seeds into the OS keyring."""
    record = daemon.require_identity()
    fingerprint = daemon.keys.fingerprint
    path = daemon.home.identity

    def move() -> None:
        # Keyring first, read back; only then drop the seeds from the file.
        store_seeds(
            fingerprint,
            {"signing_seed": record.signing_seed, "box_secret": record.box_secret},
        )
        save_identity(path, record, keyring=True)

    await trio.to_thread.run_sync(move)
    return SecureReply(storage=KEYRING)


def plug(daemon: Host) -> Plugs:
    """The ``secure`` op."""
    return Plugs(ops=(op(SECURE, functools.partial(secure, daemon)),))
