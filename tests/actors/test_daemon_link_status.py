"""``status`` tells the truth about the relay link: never connected while its actor is not
running (an instance that ended left its driver's last view, ``connected``, behind)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from crosstalk.actors.health import ActorHealth, ActorState
from crosstalk.actors.relay_link_api import LinkStatus, while_running
from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import LINK_ACTOR, Daemon
from crosstalk.features import status
from crosstalk.paths import Home
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.store.settings import RELAY_URL, set_setting
from tests.actors.fakes import running
from tests.actors.test_relay_link_fakes import URL, FakeRelay
from tests.actors.test_room_hold import ANA, room_store


async def _status(daemon: Daemon) -> dict[str, Any]:
    return (await daemon.ops.call("status", {}))["relay"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("plant", [False, True])
async def test_status_is_not_connected_while_the_link_actor_is_not_running(
    plant: bool, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connected while the link runs; once its instance has ended (here: it returned, and waits
    out a 10 s backoff) and after the actor is stopped, ``status`` says not connected and names
    the actor's state. The planted bug reads the link's own view alone, which stays connected."""
    if plant:
        def own_view(link: LinkStatus, actor: object) -> LinkStatus:
            return link

        monkeypatch.setattr("crosstalk.daemon.link.while_running", own_view)
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        supervisor = Supervisor(heartbeat=5.0, backoff_initial=10.0, backoff_max=10.0)
        async with room_store() as store, running(supervisor) as sup:
            await store.write(lambda conn: set_setting(conn, RELAY_URL, URL))
            daemon = Daemon(home, store, sup, 5.0, features=(status.FEATURE,),
                            connect=FakeRelay().connect)
            await daemon.start()
            await daemon.relay()
            await trio.testing.wait_all_tasks_blocked()  # the in-memory relay takes it at once
            assert (await _status(daemon))["connected"] is True

            # The instance ends normally, as the link's did after an 8 s relay freeze.
            scope = sup._children[LINK_ACTOR].instance_scope  # ended from outside
            assert scope is not None
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            health = sup.health(LINK_ACTOR)
            assert health is not None and health.state is ActorState.RESTARTING
            restarting = await _status(daemon)

            await sup.stop_actor(LINK_ACTOR)
            stopped = await _status(daemon)
    if plant:
        assert (restarting["connected"], stopped["connected"]) == (True, True)
        return
    assert restarting["connected"] is False
    assert restarting["state"] == "link actor restarting"
    assert "returned" in restarting["last_error"]
    assert (stopped["connected"], stopped["state"]) == (False, "link actor stopped")


def test_a_running_link_shows_its_own_view() -> None:
    """While the actor runs, its status passes through unchanged, connected or not."""
    view = LinkStatus(url=URL, state="ready", connected=True, last_error=None, relay_key=None,
                      queued=0, attempts=1)
    alive = ActorHealth(LINK_ACTOR, ActorState.RUNNING, 0, None, 0.0, 0)
    assert while_running(view, alive) is view
    failed = ActorHealth(LINK_ACTOR, ActorState.FAILED, 5, "ValueError: x", 0.0, 0)
    shown = while_running(view, failed)
    assert (shown.connected, shown.state, shown.last_error) == (
        False, "link actor failed", "ValueError: x",
    )
