"""``hook_event``, the one op a hook event sends, against the gate actor and a real (in-memory)
database: what it commits, and how many times."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from crosstalk.core.triage import SessionStatus
from crosstalk.features.attention.sessions import HookEventParams, hook_event
from crosstalk.store.sessions import get_session
from tests.actors.gate_world import InlineStore
from tests.actors.test_gate_actor import gate_world


class NoOps:
    """The op table of a daemon without the memory feature (no ``working_set``)."""

    def has(self, name: str) -> bool:
        return False

    async def call(self, name: str, params: Any) -> dict[str, Any]:
        raise AssertionError(f"no op {name} here")


class Host:
    def __init__(self, store: InlineStore) -> None:
        self.store = store
        self.ops = NoOps()


def commits_so_far(store: InlineStore) -> int:
    count = 0
    while True:
        try:
            store.commits.receive_nowait()
        except trio.WouldBlock:
            return count
        count += 1


async def test_a_prompt_registers_and_turns_its_session_in_one_commit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A new session's prompt (``status: busy``) registers it and marks it busy in the gate's
    one transaction; the reply describes the session as registered."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        commits_so_far(world.store)
        params = HookEventParams("s1", client="claude", project="/p", status="busy")
        reply = await hook_event(Host(world.store), lambda: world.inbox, params)
        await trio.testing.wait_all_tasks_blocked()

        assert commits_so_far(world.store) == 1
        assert (reply.session.name, reply.session.client, reply.session.project) == (
            "s1", "claude", "/p",
        )
        stored = world.store.now(lambda conn: get_session(conn, "s1"))
        assert stored is not None
        assert (stored.client, stored.status) == ("claude", SessionStatus.BUSY)


async def test_an_event_without_a_status_only_registers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool event (no status) registers the session without asking the gate."""
    async with gate_world() as world:
        await trio.testing.wait_all_tasks_blocked()
        commits_so_far(world.store)
        params = HookEventParams("s2", client="codex", project="/q")
        reply = await hook_event(Host(world.store), lambda: world.inbox, params)

        assert commits_so_far(world.store) == 1
        assert reply.session.status == SessionStatus.UNKNOWN.value
