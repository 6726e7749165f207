"""``secure``: move this identity's secret seeds into the OS keyring."""

from __future__ import annotations

import attrs
import trio

from crosstalk.actors.control import OpTable
from crosstalk.daemon import Daemon
from crosstalk.store.identity import save_identity
from crosstalk.store.keyring_store import KEYRING, store_seeds


@attrs.frozen
class NoParams:
    pass


@attrs.frozen
class SecureReply:
    storage: str


def register(ops: OpTable, daemon: Daemon) -> None:
    async def secure(_: NoParams) -> SecureReply:
        record = daemon.require_identity()
        fingerprint = daemon.keys.fingerprint

        def move() -> None:
            # Keyring first, read back; only then drop the seeds from the file.
            store_seeds(
                fingerprint,
                {"signing_seed": record.signing_seed, "box_secret": record.box_secret},
            )
            save_identity(daemon.home.identity, record, keyring=True)

        await trio.to_thread.run_sync(move)
        return SecureReply(storage=KEYRING)

    ops.add("secure", NoParams, secure)
