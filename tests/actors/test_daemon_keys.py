"""The daemon derives its keys once per identity record, and again when the record changes."""

from __future__ import annotations

import tempfile
from pathlib import Path

from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import Daemon
from crosstalk.paths import Home
from crosstalk.store.identity import IdentityRecord, save_identity
from tests.actors.fakes import running
from tests.actors.test_daemon_inbound import _unreachable
from tests.actors.test_room_hold import ANA, BEN, room_store


async def test_keys_are_derived_once_and_follow_a_new_identity() -> None:
    """Asking twice gives the same keys object (not derived again); adopting another identity
    (``link``) gives that identity's keys at once."""
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        async with room_store() as store, running(Supervisor(heartbeat=5.0)) as sup:
            daemon = Daemon(home, store, sup, 5.0, features=(), connect=_unreachable)
            first = daemon.keys
            assert daemon.keys is first
            assert first.fingerprint == ANA.fingerprint
            daemon.adopt_identity(IdentityRecord("ana", "m2", BEN.ed_seed, BEN.x_secret, 1.0))
            assert daemon.keys.fingerprint == BEN.fingerprint
            assert daemon.keys.ed_pub == BEN.ed_pub and daemon.keys.x_pub == BEN.x_pub
